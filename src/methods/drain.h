/* drain.h -- the drain of the update queue: a rankd applies what Enqueue
 * put in the boards' streams (store_queue.c), in batches, at the pace
 * Redis takes.
 *
 * One worker of each rankd drains (its loop, its store). It is a consumer
 * of the streams of the boards rk:queues lists, those with work (at most
 * RANK_QUEUE_BOARDS_MAX at once, read again every RANK_QUEUE_REFRESH_MS);
 * once a board's streams are empty it takes the board off the list and
 * forgets it, so an idle queue costs neither Redis nor rankd anything. It
 * reads up to RANK_QUEUE_READ_COUNT entries of a stream, applies them in
 * order through the store's update path (one script call per
 * RANK_GROUP_MAX_ITEMS of them), and acknowledges and deletes them only
 * once applied. Entries pending on a
 * rankd that died (or lost Redis) are claimed by the others once idle for
 * the board's queue_claim_after. Delivery is at least once; since every
 * entry carries its request id, the effect is exactly once (within the
 * dedup window). An entry that can no longer apply (its period closed, a
 * board option changed, its request id reused for another update) goes to
 * the dead-letter stream with the reason. queue_rate caps what this rankd
 * applies of a board per second.
 */
#ifndef RANK_DRAIN_H
#define RANK_DRAIN_H

#include "handler.h"
#include "loop.h"
#include "store.h"

typedef struct _RankQueue RankQueue;

/* Starts draining on loop (its thread only from then on); handler gives
 * the configuration in force and the clock. */
RankQueue *rank_queue_new (RankLoop *loop, RankStore *store,
                           RankHandler *handler);

/* Reads nothing new from now on; TRUE once nothing it read is in flight. */
gboolean rank_queue_stop (RankQueue *queue);

/* After the loop stopped. */
void rank_queue_free (RankQueue *queue);

#endif /* RANK_DRAIN_H */
