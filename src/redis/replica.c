/* replica.c -- a replica's lag, by heartbeat (see replica.h). */
#include "replica.h"

#include "constants.h"
#include "metrics.h"

static void
ignore_reply (const RankReply *reply, const GError *error, gpointer data)
{
}

void
rank_replica_beat (RankRedisLink *primary, const char *key, gint64 now_us)
{
  char value[24], ttl[16];
  const char *set[] = { "SET", key, value, "PX", ttl };

  if (!rank_redis_link_is_up (primary))
    return;
  g_snprintf (value, sizeof value, "%" G_GINT64_FORMAT, now_us);
  g_snprintf (ttl, sizeof ttl, "%d", RANK_HEARTBEAT_TTL_MS);
  rank_redis_link_send (primary, 5, set, NULL, ignore_reply, NULL);
}

static void
heartbeat_read (const RankReply *reply, const GError *error, gpointer data)
{
  RankReplica *r = data;

  r->probing = FALSE;
  if (error == NULL && reply->type == RANK_REPLY_STRING)
    {
      gint64 v = g_ascii_strtoll (reply->str, NULL, 10);

      if (v > r->seen_us)
        r->seen_us = v;
    }
  rank_metrics_replica_lag (
      rank_redis_link_name (r->link),
      r->seen_us > 0 ? (double) (g_get_monotonic_time () - r->seen_us) / 1e6
                     : -1);
}

void
rank_replica_probe (RankReplica *r, const char *key)
{
  const char *get[] = { "GET", key };

  if (r->probing || !rank_redis_link_is_up (r->link))
    return;
  r->probing = TRUE;
  rank_redis_link_send (r->link, 2, get, NULL, heartbeat_read, r);
}

gboolean
rank_replica_fresh (const RankReplica *r, int max_lag_ms, gint64 fresh_after_us,
                    gint64 now_us)
{
  return r->seen_us > fresh_after_us
         && now_us - r->seen_us < (gint64) max_lag_ms * 1000
         && rank_redis_link_is_up (r->link);
}
