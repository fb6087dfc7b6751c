# The documentation is kept true by the catalog, the code and a server:
#
#   1. every function of the extension (the pg_proc rows that pg_depend
#      ties to it) is documented in docs/sql-api.md under its name, with
#      every argument in one written call form and every output column in
#      the same entry; every view has a section of its own (a heading that
#      names it) with a table row for each of its columns; every value of
#      the extension's enum types (task and step states, classes) is shown
#      as stored, in backquotes;
#   2. every SQLSTATE that the C code (the ERRCODE_* names used in src/,
#      through PostgreSQL's utils/errcodes.h and src/durable_errcodes.h) and
#      the SQL scripts (ERRCODE = '...') raise or answer has a row in the
#      error table of docs/errors.md;
#   3. every SQL block marked runnable (the line before its ```sql fence is
#      "<!-- runnable -->") in README.md and docs/*.md runs as written on a
#      fresh database, the blocks of one file in order in one session, and
#      the errors it raises are exactly those its comments announce, in
#      order (a comment "-- 55U01: ..." after a statement announces that
#      statement's SQLSTATE);
#   4. no state is written in capitals outside code (the column holds
#      `completed`, never COMPLETED), and every link between README.md and
#      docs/*.md leads to a file and a heading that exist;
#   5. every citation "docs/design.md section N" in the code, the scripts
#      and the tests names a numbered section of docs/design.md.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my @files = ('README.md', sort glob('docs/*.md'));
my %text = map { ($_ => slurp_file($_)) } @files;
my $api = $text{'docs/sql-api.md'} // '';
ok(length $api, 'docs/sql-api.md exists');

my $node = DurableNode::new_node('docs');

# ---- 1. every function and view of the extension is documented ----

# the text of a call form starting at offset $at of $s: from "(" to its
# matching ")"
sub call_form
{
	my ($s, $at) = @_;
	my $depth = 0;
	for (my $i = $at; $i < length $s; $i++)
	{
		my $c = substr($s, $i, 1);
		$depth++ if $c eq '(';
		$depth-- if $c eq ')';
		return substr($s, $at, $i - $at + 1) if $depth == 0;
	}
	return substr($s, $at);
}

# the entry (list item or paragraph) around offset $at of $s
sub entry_at
{
	my ($s, $at) = @_;
	my $start = rindex($s, "\n\n", $at);
	my $item = rindex($s, "\n- ", $at);
	$start = $item if $item > $start;
	$start = $start < 0 ? 0 : $start + 1;
	my $end = length $s;
	for my $stop ("\n\n", "\n- ", "\n#")
	{
		my $e = index($s, $stop, $at);
		$end = $e if $e >= 0 && $e < $end;
	}
	return substr($s, $start, $end - $start);
}

my @functions = split /\n/, $node->safe_psql('postgres', q{
	SELECT CASE WHEN n.nspname = 'durable' THEN 'durable.' ELSE '' END || p.proname,
	       coalesce(array_to_string(ARRAY(
	           SELECT a.name FROM unnest(coalesce(p.proargnames, '{}'), coalesce(p.proargmodes,
	                  array_fill('i'::"char", ARRAY[coalesce(cardinality(p.proargnames), 0)])))
	                  AS a(name, mode) WHERE a.mode IN ('i', 'b', 'v')), ' '), ''),
	       coalesce(array_to_string(ARRAY(
	           SELECT a.name FROM unnest(coalesce(p.proargnames, '{}'), p.proargmodes) AS a(name, mode)
	           WHERE a.mode IN ('o', 't', 'b')), ' '), '')
	FROM pg_proc p
	JOIN pg_namespace n ON n.oid = p.pronamespace
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
	ORDER BY 1, 2});
ok(@functions > 50, scalar(@functions) . ' functions belong to the extension');
for my $row (@functions)
{
	my ($name, $in, $out) = split /\|/, $row, -1;
	my @in = grep { length } split / /, $in;
	my @out = grep { length } split / /, $out;
	my (@missing_in, @missing_out, $found);
	my $best;
	pos($api) = undef;
	while ($api =~ /(?<![\w.])\Q$name\E\(/g)
	{
		my $at = $-[0] + length($name);
		my $form = call_form($api, $at);
		my $entry = entry_at($api, $at);
		my @mi = grep { $form !~ /\b\Q$_\E\b/ } @in;
		my @mo = grep { $entry !~ /\b\Q$_\E\b/ } @out;
		$found = 1;
		if (!defined $best || @mi + @mo < $best)
		{
			$best = @mi + @mo;
			@missing_in = @mi;
			@missing_out = @mo;
		}
		last if $best == 0;
	}
	ok($found && !@missing_in && !@missing_out,
		"docs/sql-api.md documents $name($in)"
		  . ($out ? " returning ($out)" : ''))
	  or diag(!$found ? "no \"$name(\" in docs/sql-api.md"
		: "missing arguments: @missing_in; missing output columns: @missing_out");
}

my %views;
for (split /\n/, $node->safe_psql('postgres', q{
	SELECT c.relname, a.attname
	FROM pg_class c
	JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
	JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	WHERE c.relkind IN ('v', 'm')
	ORDER BY c.relname, a.attnum}))
{
	my ($view, $column) = split /\|/;
	push @{ $views{$view} }, $column;
}
ok(keys %views > 10, scalar(keys %views) . ' views belong to the extension');
for my $view (sort keys %views)
{
	my ($level, $section) =
	  $api =~ /^(#+) [^\n]*`durable\.\Q$view\E`[^\n]*\n(.*?)(?=^#{1,6} |\z)/ms;
	my @missing = defined $section
	  ? grep { $section !~ /^\| `\Q$_\E` \|/m } @{ $views{$view} }
	  : @{ $views{$view} };
	ok(defined $section && !@missing,
		"docs/sql-api.md has a section on durable.$view with its "
		  . scalar(@{ $views{$view} }) . ' columns')
	  or diag(defined $section ? "missing columns: @missing" : 'no heading names it');
}

my @labels = split /\n/, $node->safe_psql('postgres', q{
	SELECT e.enumlabel FROM pg_enum e
	JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = e.enumtypid AND d.deptype = 'e'
	JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'durable'
	ORDER BY e.enumtypid, e.enumsortorder});
my @unshown = grep { $api !~ /`\Q$_\E`/ } @labels;
ok(@labels >= 18 && !@unshown,
	'docs/sql-api.md shows every state and class as stored (' . scalar(@labels) . ' values)')
  or diag("not shown: @unshown");

# ---- 2. every SQLSTATE raised is in the error tables ----

my $pg_config = $ENV{PG_CONFIG} || 'pg_config';
my $includedir = `$pg_config --includedir-server`;
chomp $includedir;
my %code_of;
for my $header ("$includedir/utils/errcodes.h", 'src/durable_errcodes.h')
{
	my $h = slurp_file($header);
	while ($h =~ /#define\s+(ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)',\s*'(.)',\s*'(.)',\s*'(.)',\s*'(.)'\)/g)
	{
		$code_of{$1} = "$2$3$4$5$6";
	}
}
ok(keys %code_of > 200, 'the errcodes of PostgreSQL and of durable are read');

my %raised;    # code -> where
for my $source (sort glob('src/*.[ch]'), glob('src/*/*.[ch]'))
{
	next if $source eq 'src/durable_errcodes.h';
	for my $name (slurp_file($source) =~ /\b(ERRCODE_[A-Z0-9_]+)\b/g)
	{
		next if $name eq 'ERRCODE_TO_CATEGORY';    # a macro, not a code
		my $code = $code_of{$name};
		ok(0, "$name of $source is a known SQLSTATE") unless defined $code;
		$raised{$code} //= "$name in $source" if defined $code;
	}
}
for my $script (sort glob('durable--*.sql'))
{
	for my $value (slurp_file($script) =~ /ERRCODE\s*=\s*'([^']+)'/gi)
	{
		my $code = $value =~ /^[0-9A-Z]{5}$/ ? $value : $code_of{ 'ERRCODE_' . uc $value };
		ok(0, "ERRCODE '$value' of $script is a known SQLSTATE") unless defined $code;
		$raised{$code} //= "'$value' in $script" if defined $code;
	}
}
ok(keys %raised >= 15, scalar(keys %raised) . ' SQLSTATEs are raised by the code');

sub table_codes
{
	my ($s) = @_;
	my %c;
	$c{$1} = 1 while $s =~ /^\| `([0-9A-Z]{5})` \|/mg;
	return \%c;
}
my $errors_table = table_codes($text{'docs/errors.md'} // '');
my @missing = grep { !$errors_table->{$_} } sort keys %raised;
ok(!@missing, 'every SQLSTATE raised has a row in docs/errors.md')
  or diag(join "\n", map { "$_ ($raised{$_})" } @missing);
# and the generic ones a worker must handle, though durable does not raise them
for my $code (qw(40001 40P01 57014 57P01 08006 25P02))
{
	ok($errors_table->{$code}, "the error table says what a worker does on $code");
}

# ---- 3. every runnable SQL block runs as written ----

my $blocks = 0;
for my $file (@files)
{
	my @sql = $text{$file} =~ /^<!-- runnable -->\n```sql\n(.*?)^```\n/msg;
	next unless @sql;
	$blocks += @sql;
	(my $db = lc "docs_$file") =~ s/\W/_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION durable');
	my $script = join '', "\\set VERBOSITY verbose\n", @sql;
	my @announced = $script =~ /--\s*([0-9A-Z]{5}):/g;
	my ($rc, $out, $err) = $node->psql($db, $script, on_error_stop => 0);
	my @raised = $err =~ /^(?:psql:[^\n]*?)?ERROR:\s+([0-9A-Z]{5}):/mg;
	is_deeply(\@raised, \@announced,
		"the " . scalar(@sql) . " runnable blocks of $file run, raising exactly what they announce ("
		  . (join(', ', @announced) || 'nothing') . ')')
	  or diag($err);
	is($node->safe_psql($db, 'SELECT count(*) FROM durable_verify()'), '0',
		"durable_verify() is empty after the blocks of $file");
}
ok($blocks >= 5, "$blocks runnable blocks ran");
my ($quick) = ($text{'docs/quick-start.md'} // '') =~ /^## Quick start[^\n]*\n.*?^<!-- runnable -->\n```sql\n/ms;
ok(defined $quick, "the Quick start in SQL (docs/quick-start.md) is marked runnable");

# ---- 4. states in prose, and links ----

for my $file (@files)
{
	my $prose = $text{$file};
	$prose =~ s/^```.*?^```//msg;    # fenced code
	$prose =~ s/`[^`\n]*`//g;        # inline code
	$prose =~ s/READ COMMITTED//g;    # the isolation level
	my @capitals = $prose =~ /\b(CREATED|READY|RUNNING|WAITING|COMPLETED|FAILED|CANCELLED|NEEDS_REVIEW|PLANNED|STARTED|COMMITTED|UNKNOWN|COMPENSATED)\b/g;
	ok(!@capitals, "$file writes states as stored, not in capitals")
	  or diag(join ', ', @capitals);
}

# GitHub's anchors: lower case, punctuation but "-" and "_" dropped,
# spaces to "-"
sub anchors
{
	my ($s) = @_;
	$s =~ s/^```.*?^```//msg;
	my %a;
	for my $h ($s =~ /^#{1,6} (.*)$/mg)
	{
		(my $id = lc $h) =~ s/[^\w\- ]//g;
		$id =~ s/ /-/g;
		$a{$id} = 1;
	}
	return \%a;
}
my @broken;
for my $file (@files)
{
	my $dir = $file =~ m{^docs/} ? 'docs/' : '';
	(my $s = $text{$file}) =~ s/^```.*?^```//msg;
	while ($s =~ /\]\(([^)\s]+)\)/g)
	{
		my $link = $1;
		next if $link =~ m{^[a-z]+:};
		my ($path, $anchor) = split /#/, $link, 2;
		my $target = length $path ? $dir . $path : $file;
		1 while $target =~ s{[^/]+/\.\./}{};
		if (!-e $target)
		{
			push @broken, "$file: $link (no $target)";
			next;
		}
		next unless defined $anchor && $target =~ /\.md$/;
		my $t = $text{$target} // slurp_file($target);
		push @broken, "$file: $link (no heading)" unless anchors($t)->{$anchor};
	}
}
ok(!@broken, 'every link of README.md and docs/ leads somewhere') or diag(join "\n", @broken);

# ---- 5. citations of the design resolve ----

# The code, the scripts and the tests cite the contract as "docs/design.md
# section N" (or "sections N and M"): each N must be a numbered heading of
# docs/design.md, and nothing cites a design that is not in the repository.
my $design = $text{'docs/design.md'} // '';
my %sections = map { ($_ => 1) } $design =~ /^## (\d+)\. /mg;
ok(keys %sections >= 15, 'docs/design.md has its numbered sections');
my (@unresolved, @elsewhere);
my @sources = map { glob $_ } qw(src/*.h src/*/*.[ch] sql/*.sql expected/*.out
  test/t/*.pl test/perl/*.pm test/pgtap/*.sql test/isolation/specs/*.spec
  tools/* docs/*.md);
for my $source (@sources)
{
	next if $source eq 'test/t/025_docs.pl' || !-f $source;
	my $s = slurp_file($source);
	while ($s =~ /docs\/design\.md,? sections? (\d+(?:(?:, | and )\d+)*)/g)
	{
		push @unresolved, "$source: section $_"
		  for grep { !$sections{$_} } $1 =~ /(\d+)/g;
	}
	push @elsewhere, $source if $s =~ /\bDESIGN(?:\.md| section)/;
}
ok(!@unresolved, 'every citation of docs/design.md names a section of it')
  or diag(join "\n", @unresolved);
ok(!@elsewhere, 'nothing cites a design document outside the repository')
  or diag(join "\n", @elsewhere);

$node->stop;
done_testing();
