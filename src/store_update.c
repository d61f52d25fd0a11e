/* store_update.c -- Update and Remove (see store.h).
 *
 * Every update is one EVALSHA of update.lua on the member's shard: the
 * request-id check, the read, the computation and the writes happen
 * atomically in Redis. Its arguments are named here (UpdateArg) and filled
 * by name; tests/test_requestid.c checks that update.lua reads each name
 * from the position given here, so a swap on either side fails a test.
 */
#include "store.h"

#include <string.h>

#include "orderkey.h"
#include "requestid.h"
#include "shard.h"
#include "store_private.h"

/* ---- Update, Remove ---- */

typedef struct
{
  RankStoreUpdateFunc func;
  gpointer data;
  const RankBoardOptions *options; /* the context's: lives as long */
} UpdateTask;

static void update_replied (const RankReply *reply, const GError *error,
                            gpointer data);

void
rank_store_update (RankStore *store, const RankContext *ctx,
                   const RankUpdate *update, RankStoreUpdateFunc func,
                   gpointer data)
{
  UpdateTask *task = g_new (UpdateTask, 1);
  RankCommand cmd;
  guint node = rank_store_update_command (ctx, update, store->nodes, &cmd);

  task->func = func;
  task->data = data;
  task->options = ctx->options;
  rank_backend_send (store->backend, node, &cmd, RANK_SEND_REPLICATED,
                     update_replied, task);
}

/* {score, rank, applied, subscores} */
static void
update_replied (const RankReply *reply, const GError *error, gpointer data)
{
  UpdateTask *task = data;
  g_autoptr (GError) bad = NULL;
  RankUpdateResult result = { 0 };
  gint64 applied = 0;
  gsize subs_len = task->options->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES;
  const RankReply *subs = NULL;

  if (error == NULL
      && (!rank_reply_int_at (reply, 0, &result.score)
          || !rank_reply_int_at (reply, 1, &result.rank)
          || !rank_reply_int_at (reply, 2, &applied)
          || (subs = rank_reply_string_at (reply, 3)) == NULL
          || (subs->len != subs_len && subs->len != 0)))
    error = bad = store_unexpected (reply, "update.lua");
  if (error == NULL && subs->len == subs_len)
    store_decode_subscores (task->options, subs->str, &result.n_subscores,
                            result.subscores);
  result.applied = applied != 0;
  task->func (error != NULL ? NULL : &result, error, task->data);
  g_free (task);
}

/* ---- update.lua's arguments ---- */

/* After its keys (z, t, q, d, c, a), in this order. */
typedef enum
{
  ARG_MEMBER,
  ARG_MODE,
  ARG_VALUE,
  ARG_TIME,
  ARG_WINDOW,
  ARG_FINGERPRINT,
  ARG_IDHASH,
  ARG_SELECTOR,
  ARG_NOW,
  ARG_RANK_WANTED,
  ARG_ORDER,
  ARG_KIND,
  ARG_CAP,
  ARG_EXPIRE_AT,
  ARG_SUBSCORES,
  ARG_KEEP_SUBSCORES,
  ARG_DATA_GIVEN,
  ARG_DATA,
  ARG_BUCKET, /* the current bucket; then the 4 before it */
  ARG_RECORD_EXPIRE_AT = ARG_BUCKET + RANK_DEDUP_BUCKETS + 1,
  N_ARGS,
} UpdateArg;

const char *const rank_store_update_arg_names[] = {
  [ARG_MEMBER] = "member",
  [ARG_MODE] = "mode",
  [ARG_VALUE] = "value",
  [ARG_TIME] = "time",
  [ARG_WINDOW] = "window",
  [ARG_FINGERPRINT] = "fingerprint",
  [ARG_IDHASH] = "idhash",
  [ARG_SELECTOR] = "selector",
  [ARG_NOW] = "now",
  [ARG_RANK_WANTED] = "rank_wanted",
  [ARG_ORDER] = "order",
  [ARG_KIND] = "kind",
  [ARG_CAP] = "cap",
  [ARG_EXPIRE_AT] = "expire_at",
  [ARG_SUBSCORES] = "subs",
  [ARG_KEEP_SUBSCORES] = "keep_subs",
  [ARG_DATA_GIVEN] = "data_given",
  [ARG_DATA] = "data",
  [ARG_BUCKET] = "names[0]",
  [ARG_BUCKET + 1] = "names[1]",
  [ARG_BUCKET + 2] = "names[2]",
  [ARG_BUCKET + 3] = "names[3]",
  [ARG_BUCKET + 4] = "names[4]",
  [ARG_RECORD_EXPIRE_AT] = "record_expire_at",
};
G_STATIC_ASSERT (G_N_ELEMENTS (rank_store_update_arg_names) == N_ARGS);
G_STATIC_ASSERT (RANK_DEDUP_BUCKETS == 4);
const guint rank_store_update_n_args = N_ARGS;

/* One argument: bytes, or a number rankd formats. */
typedef struct
{
  const void *bytes; /* NULL: number */
  gsize len;
  gint64 number;
} Arg;

#define BYTES(p, n) ((Arg){ (p), (n), 0 })
#define TEXT(s) ((Arg){ (s), strlen (s), 0 })
#define NUMBER(v) ((Arg){ NULL, 0, (v) })

guint
rank_store_update_command (const RankContext *ctx, const RankUpdate *update,
                           guint nodes, RankCommand *cmd)
{
  static const char *const keys[]
      = { RANK_KEY_SUFFIX_SCORES,  RANK_KEY_SUFFIX_TIMES,
          RANK_KEY_SUFFIX_REQUEST, RANK_KEY_SUFFIX_DISTINCT,
          RANK_KEY_SUFFIX_COUNTS,  RANK_KEY_SUFFIX_DATA };
  const RankBoardOptions *o = ctx->options;
  gsize member_len = strlen (update->member);
  guint shard = store_shard_of (ctx, update->member, member_len);
  guint8 time[RANK_ORDERKEY_TIME_BYTES], fp[RANK_FINGERPRINT_BYTES],
      idhash[RANK_REQUEST_ID_HASH_BYTES];
  guint8 subs[RANK_SUBSCORES_MAX * RANK_ORDERKEY_SUBSCORE_BYTES];
  gint64 buckets[RANK_REQUEST_BUCKET_ARGS];
  guint32 selector;
  Arg args[N_ARGS];

  rank_orderkey_encode_time (update->timestamp_ms, time);
  rank_request_fingerprint (update, fp);
  rank_request_id_hash (update->request_id, idhash, &selector);
  rank_request_buckets (ctx->dedup_window_ms, ctx->now_ms, buckets);
  /* Without subscores, an INCREMENT keeps the member's own; a new member
   * gets 0s. */
  g_assert (update->n_subscores == 0 || update->n_subscores == o->n_subscores);
  /* The config refuses more than RANK_SUBSCORES_MAX; the second bound says
   * so to the compiler, whose -O3 warns of an overflow of subs otherwise. */
  for (guint i = 0; i < o->n_subscores && i < RANK_SUBSCORES_MAX; i++)
    rank_orderkey_encode_subscore (
        update->n_subscores > 0 ? update->subscores[i] : 0, o->subscore_asc[i],
        subs + i * RANK_ORDERKEY_SUBSCORE_BYTES);

  args[ARG_MEMBER] = BYTES (update->member, member_len);
  args[ARG_MODE] = NUMBER (update->mode);
  args[ARG_VALUE] = NUMBER (update->value);
  args[ARG_TIME] = BYTES (time, sizeof time);
  args[ARG_WINDOW] = NUMBER (ctx->dedup_window_ms);
  args[ARG_FINGERPRINT] = BYTES (fp, sizeof fp);
  args[ARG_IDHASH] = BYTES (idhash, sizeof idhash);
  args[ARG_SELECTOR] = NUMBER (selector);
  args[ARG_NOW] = NUMBER (ctx->now_ms);
  /* The rank within one shard is not the board's: sharded updates leave it
   * unset rather than ask every shard. */
  args[ARG_RANK_WANTED] = TEXT (o->shards > 1 ? "0" : "1");
  args[ARG_ORDER] = TEXT (store_order_name (o->order));
  args[ARG_KIND] = TEXT (store_kind_name (o->rank));
  /* Each shard keeps its best cap: the board's best cap are among them. */
  args[ARG_CAP] = NUMBER (o->cap);
  /* A period's keys expire by themselves once it is past retention. */
  args[ARG_EXPIRE_AT] = NUMBER (
      o->period.kind == RANK_PERIOD_NONE
          ? 0
          : rank_period_expiry_ms (&o->period, &ctx->period, o->retention));
  args[ARG_SUBSCORES]
      = BYTES (subs, o->n_subscores * RANK_ORDERKEY_SUBSCORE_BYTES);
  args[ARG_KEEP_SUBSCORES] = TEXT (update->n_subscores == 0 ? "1" : "0");
  args[ARG_DATA_GIVEN] = TEXT (update->data_given ? "1" : "0");
  args[ARG_DATA] = update->data_given ? BYTES (update->data, update->data_len)
                                      : BYTES ("", 0);
  for (guint i = 0; i <= RANK_DEDUP_BUCKETS; i++)
    args[ARG_BUCKET + i] = NUMBER (buckets[i]);
  args[ARG_RECORD_EXPIRE_AT] = NUMBER (buckets[RANK_DEDUP_BUCKETS + 1]);

  rank_command_init_script (cmd, RANK_SCRIPT_UPDATE);
  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    store_add_key (cmd, ctx, shard, keys[i]);
  rank_command_keys_done (cmd);
  for (guint i = 0; i < N_ARGS; i++)
    if (args[i].bytes != NULL)
      rank_command_add (cmd, args[i].bytes, args[i].len);
    else
      rank_command_add_int (cmd, args[i].number);
  return rank_shard_node (shard, nodes);
}
