/* period.h -- periodic boards: which period a time falls in.
 *
 * A board with period=hourly|daily|weekly|monthly keeps one set of keys per
 * period, named by the period's label; period=custom cuts time into
 * period_seconds from period_epoch. Calendar periods follow the board's
 * timezone (an IANA name), daylight-saving changes included: a daily period
 * is one local day, 23, 24 or 25 hours long; a monthly one runs from local
 * midnight on the 1st to local midnight on the next 1st. Hourly periods are
 * 3600 s, aligned to the local hour.
 */
#ifndef RANK_PERIOD_H
#define RANK_PERIOD_H

#include <glib.h>

typedef enum
{
  RANK_PERIOD_NONE,
  RANK_PERIOD_HOURLY,
  RANK_PERIOD_DAILY,
  RANK_PERIOD_WEEKLY,
  RANK_PERIOD_MONTHLY,
  RANK_PERIOD_CUSTOM,
} RankPeriodKind;

typedef struct
{
  RankPeriodKind kind;
  GTimeZone *timezone; /* calendar periods; a reference */
  int week_start;      /* 1 Monday .. 7 Sunday */
  gint64 length_s;     /* custom */
  gint64 epoch_s;      /* custom */
} RankPeriodRule;

#define RANK_PERIOD_LABEL_MAX 40

typedef struct
{
  gint64 start_ms; /* inclusive */
  gint64 end_ms;   /* exclusive */
  char label[RANK_PERIOD_LABEL_MAX];
} RankPeriod;

/* The period of rule that contains t_ms (Unix ms, >= 0). */
void rank_period_of (const RankPeriodRule *rule, gint64 t_ms, RankPeriod *out);

/* The period back periods before the one containing t_ms. */
void rank_period_back (const RankPeriodRule *rule, gint64 t_ms, guint back,
                       RankPeriod *out);

/* When the keys of period may go, keeping retention periods after it:
 * the end of the retention-th period after it. */
gint64 rank_period_expiry_ms (const RankPeriodRule *rule,
                              const RankPeriod *period, guint retention);

#endif /* RANK_PERIOD_H */
