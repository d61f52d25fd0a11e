/* period.c -- period boundaries (see period.h).
 *
 * Calendar arithmetic goes through GDateTime in the board's timezone: local
 * midnights and month starts are built from local dates, so a period's
 * length follows the zone's daylight-saving rules and month lengths.
 */
#include "period.h"

static gint64
unix_ms (GDateTime *dt)
{
  return g_date_time_to_unix (dt) * 1000;
}

/* Local midnight starting the date y-m-d in tz. */
static GDateTime *
local_midnight (GTimeZone *tz, int y, int m, int d)
{
  return g_date_time_new (tz, y, m, d, 0, 0, 0);
}

/* The local date d days after y-m-d (calendar arithmetic at noon, clear of
 * any daylight-saving jump). */
static void
add_days (GTimeZone *tz, int *y, int *m, int *d, int days)
{
  g_autoptr (GDateTime) noon = g_date_time_new (tz, *y, *m, *d, 12, 0, 0);
  g_autoptr (GDateTime) later = g_date_time_add_days (noon, days);

  g_date_time_get_ymd (later, y, m, d);
}

static void
calendar_period (const RankPeriodRule *rule, gint64 t_ms, RankPeriod *out)
{
  g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (t_ms / 1000);
  g_autoptr (GDateTime) local = g_date_time_to_timezone (utc, rule->timezone);
  g_autoptr (GDateTime) start = NULL;
  g_autoptr (GDateTime) end = NULL;
  int y, m, d, y2, m2, d2;

  g_date_time_get_ymd (local, &y, &m, &d);
  switch (rule->kind)
    {
    case RANK_PERIOD_DAILY:
      y2 = y, m2 = m, d2 = d;
      add_days (rule->timezone, &y2, &m2, &d2, 1);
      start = local_midnight (rule->timezone, y, m, d);
      end = local_midnight (rule->timezone, y2, m2, d2);
      g_snprintf (out->label, sizeof out->label, "%04d-%02d-%02d", y, m, d);
      break;
    case RANK_PERIOD_WEEKLY:
      {
        int back
            = (g_date_time_get_day_of_week (local) - rule->week_start + 7) % 7;

        add_days (rule->timezone, &y, &m, &d, -back);
        y2 = y, m2 = m, d2 = d;
        add_days (rule->timezone, &y2, &m2, &d2, 7);
        start = local_midnight (rule->timezone, y, m, d);
        end = local_midnight (rule->timezone, y2, m2, d2);
        g_snprintf (out->label, sizeof out->label, "%04d-%02d-%02d", y, m, d);
        break;
      }
    default: /* monthly */
      start = local_midnight (rule->timezone, y, m, 1);
      end = local_midnight (rule->timezone, m == 12 ? y + 1 : y,
                            m == 12 ? 1 : m + 1, 1);
      g_snprintf (out->label, sizeof out->label, "%04d-%02d", y, m);
      break;
    }
  out->start_ms = unix_ms (start);
  out->end_ms = unix_ms (end);
}

void
rank_period_of (const RankPeriodRule *rule, gint64 t_ms, RankPeriod *out)
{
  gint64 t_s = t_ms / 1000;

  switch (rule->kind)
    {
    case RANK_PERIOD_NONE:
      out->start_ms = 0;
      out->end_ms = G_MAXINT64;
      out->label[0] = '\0';
      return;
    case RANK_PERIOD_HOURLY:
      {
        g_autoptr (GDateTime) utc = g_date_time_new_from_unix_utc (t_s);
        g_autoptr (GDateTime) local
            = g_date_time_to_timezone (utc, rule->timezone);
        gint64 offset_s = g_date_time_get_utc_offset (local) / G_USEC_PER_SEC;
        gint64 into = ((t_s + offset_s) % 3600 + 3600) % 3600;
        g_autoptr (GDateTime) start_utc
            = g_date_time_new_from_unix_utc (t_s - into);
        g_autoptr (GDateTime) start
            = g_date_time_to_timezone (start_utc, rule->timezone);
        g_autofree char *label
            = g_date_time_format (start, "%Y-%m-%dT%H:%M%:z");

        out->start_ms = (t_s - into) * 1000;
        out->end_ms = out->start_ms + 3600 * 1000;
        g_strlcpy (out->label, label, sizeof out->label);
        return;
      }
    case RANK_PERIOD_CUSTOM:
      {
        gint64 since = t_s - rule->epoch_s;
        gint64 index = since >= 0
                           ? since / rule->length_s
                           : -((-since + rule->length_s - 1) / rule->length_s);

        out->start_ms = (rule->epoch_s + index * rule->length_s) * 1000;
        out->end_ms = out->start_ms + rule->length_s * 1000;
        g_snprintf (out->label, sizeof out->label, "n%" G_GINT64_FORMAT, index);
        return;
      }
    default:
      calendar_period (rule, t_ms, out);
      return;
    }
}

/* The period k periods after p (k < 0: before), found by an instant inside
 * it: no walk period by period, so a long retention costs nothing. */
static void
shift (const RankPeriodRule *rule, const RankPeriod *p, gint64 k,
       RankPeriod *out)
{
  g_autoptr (GDateTime) utc = NULL;
  g_autoptr (GDateTime) local = NULL;
  int y, m, d;

  switch (rule->kind)
    {
    case RANK_PERIOD_NONE:
      *out = *p;
      return;
    case RANK_PERIOD_HOURLY:
    case RANK_PERIOD_CUSTOM:
      rank_period_of (rule, p->start_ms + k * (p->end_ms - p->start_ms), out);
      return;
    default:
      break;
    }
  utc = g_date_time_new_from_unix_utc (p->start_ms / 1000);
  local = g_date_time_to_timezone (utc, rule->timezone);
  g_date_time_get_ymd (local, &y, &m, &d);
  if (rule->kind == RANK_PERIOD_MONTHLY)
    {
      gint64 months = (gint64) y * 12 + (m - 1) + k;
      g_autoptr (GDateTime) noon
          = g_date_time_new (rule->timezone, (int) (months / 12),
                             (int) (months % 12) + 1, 1, 12, 0, 0);

      rank_period_of (rule, g_date_time_to_unix (noon) * 1000, out);
      return;
    }
  add_days (rule->timezone, &y, &m, &d,
            (int) (k * (rule->kind == RANK_PERIOD_WEEKLY ? 7 : 1)));
  {
    g_autoptr (GDateTime) noon
        = g_date_time_new (rule->timezone, y, m, d, 12, 0, 0);

    rank_period_of (rule, g_date_time_to_unix (noon) * 1000, out);
  }
}

void
rank_period_back (const RankPeriodRule *rule, gint64 t_ms, guint back,
                  RankPeriod *out)
{
  RankPeriod now;

  rank_period_of (rule, t_ms, &now);
  shift (rule, &now, -(gint64) back, out);
}

gint64
rank_period_expiry_ms (const RankPeriodRule *rule, const RankPeriod *period,
                       guint retention)
{
  RankPeriod after;

  /* The end of the retention-th period after it: the start of the next. */
  shift (rule, period, (gint64) retention + 1, &after);
  return after.start_ms;
}
