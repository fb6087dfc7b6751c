/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  Five-field cron expressions on wall-clock time, as pure functions.
 *
 * minute hour day-of-month month day-of-week, each a comma-separated list
 * of *, a value, a range a-b, and any of those with a step /n (a/n runs
 * from a to the field's end); months and days of the week also by their
 * English three-letter names, and day of week 7 is Sunday as 0 is.  The
 * macros @yearly (@annually), @monthly, @weekly, @daily (@midnight) and
 * @hourly stand for their usual expressions.  As in Vixie cron, when both
 * day fields are restricted (neither begins with *) a day matches if
 * either does.
 *
 * Nothing here knows about time zones: DurableCronNextWall advances a
 * wall-clock time to the next one the expression matches, and
 * DurableCronPrevWall takes it back to the latest one before it.  zone.c
 * reads those in a time zone.  This file needs nothing of the server but
 * ereport, so that tools/fuzz can run it outside.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include <ctype.h>

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec"
};
static const char *const weekday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat"
};

typedef struct CronField
{
	const char *name;
	int			min;
	int			max;
	const char *const *names;	/* names of min.., or NULL */
	int			nnames;
} CronField;

static const CronField cron_fields[5] = {
	{"minute", 0, 59, NULL, 0},
	{"hour", 0, 23, NULL, 0},
	{"day of month", 1, 31, NULL, 0},
	{"month", 1, 12, month_names, 12},
	{"day of week", 0, 7, weekday_names, 7},
};

DURABLE_NORETURN static void
bad_cron(const char *cron, const char *message, const char *field)
{
	ereport(ERROR,
			errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			errmsg("invalid cron expression \"%s\": %s", cron, message),
			field ? errdetail("The error is in the %s field.", field) : 0,
			errhint("A cron expression has five fields: minute hour day-of-month month day-of-week."));
}

/* a value of a field, as a number or a name; advances *p */
static int
cron_value(const char *cron, const CronField *field, const char **p)
{
	const char *s = *p;
	int			value = 0;

	if (isdigit((unsigned char) *s))
	{
		int			digits = 0;

		while (isdigit((unsigned char) *s))
		{
			if (++digits > 2)
				bad_cron(cron, "a value has too many digits", field->name);
			value = value * 10 + (*s++ - '0');
		}
	}
	else if (field->names != NULL && isalpha((unsigned char) s[0]) &&
			 isalpha((unsigned char) s[1]) && isalpha((unsigned char) s[2]))
	{
		int			i;

		for (i = 0; i < field->nnames; i++)
			if (pg_strncasecmp(s, field->names[i], 3) == 0)
				break;
		if (i == field->nnames)
			bad_cron(cron, "unknown name", field->name);
		value = field->min + i;
		s += 3;
	}
	else
		bad_cron(cron, "a value is missing", field->name);
	if (value < field->min || value > field->max)
		bad_cron(cron, "a value is out of range", field->name);
	*p = s;
	return value;
}

/* parse one field into a bit set; *star is whether it begins with '*' */
static uint64
cron_field(const char *cron, const CronField *field, const char *s,
		   const char *end, bool *star)
{
	uint64		bits = 0;

	*star = *s == '*';
	for (;;)
	{
		int			low,
					high,
					step = 1;
		bool		single = false;

		if (*s == '*')
		{
			low = field->min;
			high = field->max;
			s++;
		}
		else
		{
			low = high = cron_value(cron, field, &s);
			if (*s == '-')
			{
				s++;
				high = cron_value(cron, field, &s);
				if (high < low)
					bad_cron(cron, "a range ends before it begins", field->name);
			}
			else
				single = true;
		}
		if (*s == '/')
		{
			s++;
			if (!isdigit((unsigned char) *s))
				bad_cron(cron, "a step is missing", field->name);
			step = 0;
			while (isdigit((unsigned char) *s))
			{
				step = step * 10 + (*s++ - '0');
				if (step > field->max + 1)
					bad_cron(cron, "a step is out of range", field->name);
			}
			if (step == 0)
				bad_cron(cron, "a step must be positive", field->name);
			if (single)
				high = field->max;	/* a/n: from a to the end */
		}
		for (int v = low; v <= high; v += step)
			bits |= UINT64CONST(1) << v;
		if (s == end)
			break;
		if (*s != ',')
			bad_cron(cron, "unexpected character", field->name);
		s++;
	}
	return bits;
}

static int
days_in_month(int year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
		return 29;
	return days[month - 1];
}

/* 0 = Sunday (Sakamoto) */
static int
weekday(int year, int month, int day)
{
	static const int t[12] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};

	if (month < 3)
		year--;
	return (year + year / 4 - year / 100 + year / 400 + t[month - 1] + day) % 7;
}

/*
 * DurableCronParse
 *		Parse a cron expression; 22023 naming the field for anything wrong,
 *		also for one that can never fire (February 30th).
 */
void
DurableCronParse(const char *cron, DurableCron *result)
{
	static const struct
	{
		const char *name;
		const char *expression;
	}			macros[] = {
		{"@yearly", "0 0 1 1 *"},
		{"@annually", "0 0 1 1 *"},
		{"@monthly", "0 0 1 * *"},
		{"@weekly", "0 0 * * 0"},
		{"@daily", "0 0 * * *"},
		{"@midnight", "0 0 * * *"},
		{"@hourly", "0 * * * *"},
	};
	const char *s = cron;
	uint64		bits[5];
	bool		star[5];
	int			nfields = 0;

	while (isspace((unsigned char) *s))
		s++;
	if (*s == '@')
	{
		const char *end = s;

		while (*end && !isspace((unsigned char) *end))
			end++;
		for (int i = 0; i < (int) lengthof(macros); i++)
			if ((size_t) (end - s) == strlen(macros[i].name) &&
				pg_strncasecmp(s, macros[i].name, end - s) == 0)
			{
				while (isspace((unsigned char) *end))
					end++;
				if (*end != '\0')
					bad_cron(cron, "nothing may follow a macro", NULL);
				DurableCronParse(macros[i].expression, result);
				return;
			}
		bad_cron(cron, "unknown macro", NULL);
	}
	while (*s)
	{
		const char *end = s;

		while (*end && !isspace((unsigned char) *end))
			end++;
		if (nfields == 5)
			bad_cron(cron, "more than five fields", NULL);
		bits[nfields] = cron_field(cron, &cron_fields[nfields], s, end,
								   &star[nfields]);
		nfields++;
		s = end;
		while (isspace((unsigned char) *s))
			s++;
	}
	if (nfields < 5)
		bad_cron(cron, "fewer than five fields", NULL);

	result->minutes = bits[0];
	result->hours = (uint32) bits[1];
	result->days = (uint32) bits[2];
	result->months = (uint16) bits[3];
	result->weekdays = (uint8) ((bits[4] | (bits[4] >> 7)) & 0x7f);	/* 7 is 0 */
	result->any_day = star[2];
	result->any_weekday = star[4];

	/* a day of the month that no month it runs in has never comes */
	if (result->any_weekday && !result->any_day)
	{
		bool		possible = false;

		for (int m = 1; m <= 12 && !possible; m++)
			for (int d = 1; d <= days_in_month(2000, m) && !possible; d++)
				possible = (result->months & (1 << m)) && (result->days & (1u << d));
		if (!possible)
			bad_cron(cron, "it never fires: no month it names has that day", "day of month");
	}
}

/* does the expression run on this day */
bool
DurableCronMatchesDay(const DurableCron *cron, int year, int month, int day)
{
	bool		by_day = (cron->days & (1u << day)) != 0;
	bool		by_weekday = (cron->weekdays & (1 << weekday(year, month, day))) != 0;

	if (!(cron->months & (1 << month)))
		return false;
	if (cron->any_day && cron->any_weekday)
		return true;
	if (cron->any_day)
		return by_weekday;
	if (cron->any_weekday)
		return by_day;
	return by_day || by_weekday;
}

/* add one to a field and carry; lower fields start over */
static void
next_day(DurableWallTime *t)
{
	t->hour = 0;
	t->minute = 0;
	if (++t->day > days_in_month(t->year, t->month))
	{
		t->day = 1;
		if (++t->month > 12)
		{
			t->month = 1;
			t->year++;
		}
	}
}

/*
 * DurableCronNextWall
 *		Advance *t to the first wall-clock minute strictly after it that the
 *		expression matches.  False when there is none before the year 9999
 *		(only a February 29th can be that far: eight years at most).
 */
bool
DurableCronNextWall(const DurableCron *cron, DurableWallTime *t)
{
	/* one minute on */
	if (++t->minute > 59)
	{
		t->minute = 0;
		if (++t->hour > 23)
			next_day(t);
	}
	while (t->year < 9999)
	{
		if (!(cron->months & (1 << t->month)))
		{
			t->day = days_in_month(t->year, t->month);
			next_day(t);
			continue;
		}
		if (!DurableCronMatchesDay(cron, t->year, t->month, t->day))
		{
			next_day(t);
			continue;
		}
		while (t->hour <= 23 && !(cron->hours & (1u << t->hour)))
		{
			t->hour++;
			t->minute = 0;
		}
		if (t->hour > 23)
		{
			next_day(t);
			continue;
		}
		while (t->minute <= 59 && !(cron->minutes & (UINT64CONST(1) << t->minute)))
			t->minute++;
		if (t->minute > 59)
		{
			t->minute = 0;
			if (++t->hour > 23)
				next_day(t);
			continue;
		}
		return true;
	}
	return false;
}

/* to the last minute of the day before t's */
static void
prev_day(DurableWallTime *t)
{
	t->hour = 23;
	t->minute = 59;
	if (--t->day < 1)
	{
		if (--t->month < 1)
		{
			t->month = 12;
			t->year--;
		}
		t->day = days_in_month(t->year, t->month);
	}
}

/*
 * DurableCronPrevWall
 *		Move t back to the latest wall-clock minute before it (or, when
 *		inclusive, at or before it) that the expression matches; false if
 *		there is none after year 1.  As
 *		DurableCronNextWall forward, it skips whole months and days, so
 *		the cost does not grow with how far back t is from now: at most
 *		the eight years that a February 29 asks for.
 */
bool
DurableCronPrevWall(const DurableCron *cron, DurableWallTime *t, bool inclusive)
{
	/* one minute back */
	if (!inclusive && --t->minute < 0)
	{
		t->minute = 59;
		if (--t->hour < 0)
			prev_day(t);
	}
	while (t->year > 1)
	{
		if (!(cron->months & (1 << t->month)))
		{
			t->day = 1;
			prev_day(t);
			continue;
		}
		if (!DurableCronMatchesDay(cron, t->year, t->month, t->day))
		{
			prev_day(t);
			continue;
		}
		while (t->hour >= 0 && !(cron->hours & (1u << t->hour)))
		{
			t->hour--;
			t->minute = 59;
		}
		if (t->hour < 0)
		{
			prev_day(t);
			continue;
		}
		while (t->minute >= 0 && !(cron->minutes & (UINT64CONST(1) << t->minute)))
			t->minute--;
		if (t->minute < 0)
		{
			t->minute = 59;
			if (--t->hour < 0)
				prev_day(t);
			continue;
		}
		return true;
	}
	return false;
}
