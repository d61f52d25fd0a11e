/* requestid.h -- how update.lua records a request id and what it stood for.
 *
 * Pure functions of their inputs (unit-tested in tests/test_requestid.c):
 *
 *   the request id's hash: 10 bytes of its SHA-256, a record's field;
 *     update.lua places the record by the field's first bytes (its
 *     selector_of), so it can move a record to another layout. Hashing
 *     bounds a record's size whatever the id's length. The hashes of
 *     one record hash share the selector's low bits (up to 20); the other 60
 *     bits keep a false match (a new id taken for a retry) below 10^-16 per
 *     request with 48 records in a hash;
 *   the fingerprint of what the id stands for: 4 bytes of the SHA-1 of the
 *     mode, value, member, and subscores and data when given, of which a
 *     record keeps 28 bits beside its bucket. A retry must carry the same;
 *     a false match needs a client bug (an id reused for another update)
 *     and 2^-28 luck, and only hides that bug;
 *   the time buckets of the dedup window an update at now looks in: the
 *     current bucket k = floor(now / ceil(window / 4)) and the 4 before it,
 *     and when a record hash marked in bucket k expires,
 *     (k + 4 + RANK_DEDUP_SWEEP_AFTER) * ceil(window / 4): numbers rankd
 *     formats for the script, as string.format costs Redis more.
 */
#ifndef RANK_REQUESTID_H
#define RANK_REQUESTID_H

#include <glib.h>

#include "constants.h"
#include "store.h"

#define RANK_REQUEST_ID_HASH_BYTES 10
#define RANK_FINGERPRINT_BYTES 4

void rank_request_id_hash (const char *request_id,
                           guint8 field[RANK_REQUEST_ID_HASH_BYTES]);

void rank_request_fingerprint (const RankUpdate *update,
                               guint8 out[RANK_FINGERPRINT_BYTES]);

/* The value of a request-id record written in time bucket: the
 * fingerprint's last 28 bits, under the bucket mod 16 in the top 4 bits
 * (update.lua tells a live record from a stale one by them). */
#define RANK_RECORD_BUCKETS 16
void rank_request_record (const guint8 fingerprint[RANK_FINGERPRINT_BYTES],
                          gint64 bucket, guint8 out[RANK_FINGERPRINT_BYTES]);

/* out[0] the current bucket, out[i] the one i before it, and
 * out[RANK_DEDUP_BUCKETS + 1] when a record hash marked in the current
 * bucket expires. */
#define RANK_REQUEST_BUCKET_ARGS (RANK_DEDUP_BUCKETS + 2)
void rank_request_buckets (gint64 window_ms, gint64 now_ms,
                           gint64 out[RANK_REQUEST_BUCKET_ARGS]);

/* A batch recorded as a whole (UpdateBatchRequest.request_id): update.lua's
 * group argument, the same for every update of the batch. Its record (4
 * bytes: the bucket and 28 bits of one SHA-1 of all the batch's updates,
 * in order) and its field (10 bytes: the SHA-256 of a NUL, then
 * the batch's request id: no Update's request id hashes so), as an
 * update's; then the number of updates (1 byte, at most
 * RANK_GROUP_MAX_ITEMS), a token of this call (8 bytes) that keeps its
 * updates from sharing a script call with another batch's, and 1 when
 * each update SETs a member of its own (else 0): update.lua then writes
 * them in one pass and answers the batch as sent, and each update's value
 * argument is its sorted-set score (store_update.c). */
#define RANK_UPDATE_GROUP_BYTES                                                \
  (RANK_FINGERPRINT_BYTES + RANK_REQUEST_ID_HASH_BYTES + 1 + 8 + 1)
#define RANK_UPDATE_GROUP_SETS (RANK_UPDATE_GROUP_BYTES - 1)
G_STATIC_ASSERT (RANK_GROUP_MAX_ITEMS <= 255);
void rank_request_group (const char *request_id,
                         const RankUpdate *const *updates, guint n,
                         gint64 bucket, guint64 token,
                         guint8 out[RANK_UPDATE_GROUP_BYTES]);

#endif /* RANK_REQUESTID_H */
