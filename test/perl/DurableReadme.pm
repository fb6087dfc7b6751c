# The Quick start in SQL (docs/quick-start.md), taken from the page itself,
# so that what runs is what the text shows: test/t/011_readme_quick_start.pl and
# tools/package (the Quick start on the installed Debian package) both take
# the Quick start from here.  Needs nothing but perl-base.
#
#   perl -I test/perl -MDurableReadme -e 'print DurableReadme::quick_start_file("docs/quick-start.md")'
package DurableReadme;

use strict;
use warnings;

# The SQL block of a page's "## Quick start" section (its first
# ```sql block), or undef when there is none.
sub quick_start
{
	my ($readme) = @_;
	my ($block) = $readme =~ /^## Quick start[^\n]*\n.*?^```sql\n(.*?)^```/ms;
	return $block;
}

# The same, from the file at the given path; dies when the file
# cannot be read or has no Quick start.
sub quick_start_file
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "could not open \"$path\": $!\n";
	my $readme = do { local $/; <$fh> };
	close($fh);
	my $block = quick_start($readme);
	die "\"$path\" has no Quick start with an SQL block\n" unless defined $block;
	return $block;
}

1;
