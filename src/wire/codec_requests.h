/* codec_requests.h -- the arguments of the busiest methods (Update,
 * UpdateBatch, GetRank, GetTopN) read into plain structs, without the
 * generated ones.
 *
 * The generated reader makes a GObject for the arguments and one for their
 * request (for every UpdateRequest of a batch, with a GArray and a
 * GHashTable of its own), and frees them again: with the field-by-field
 * reads, half of what rankd spent on an import entry and a fifth of a
 * GetRank (callgrind, bench/README.md of 4968f11). These readers read the same
 * bytes by the generated reader's rules: a field of an unknown id, or of
 * another type than the IDL declares, is skipped; a required field missing is a
 * protocol error that names it ("missing required field 'member'"); a field
 * given twice keeps the last (a list or map: both appended); the request given
 * twice is read over the first; the request absent leaves every field unset
 * (NULL, 0), which the handler refuses as it refuses them given empty. The
 * protocol (protocol.c) bounds every string and container before anything is
 * allocated for it.
 *
 * These are the codec's readers (codec.h has its writers): a field the IDL
 * gives one of these requests must be added to its struct here and to its
 * FieldSpec table in codec_requests.c.
 */
#ifndef RANK_CODEC_REQUESTS_H
#define RANK_CODEC_REQUESTS_H

#include <thrift/c_glib/protocol/thrift_protocol.h>

#include "api.h"

/* An UpdateRequest's fields: owned by a RankUpdateBatchArgs, or borrowed
 * from a generated rankUpdateRequest (rank_update_fields_of). IDL
 * UpdateRequest: 1: board, 2: member, 3: value, 4: request_id,
 * 5: optional mode, 6: optional timestamp_ms, 7: optional subscores,
 * 8: optional data, 9: optional with_rank (a field the IDL adds here must
 * be added to this struct, to update_specs in codec_requests.c and to
 * rank_update_fields_of). */
typedef struct
{
  char *board;
  char *member;
  gint64 value;
  char *request_id;
  gboolean has_mode;
  gint32 mode;
  gboolean has_timestamp_ms;
  gint64 timestamp_ms;
  GArray *subscores; /* gint64; NULL: unset */
  GHashTable *data;  /* NULL: unset */
  gboolean has_with_rank;
  gboolean with_rank;
} RankUpdateFields;

/* The fields of a generated UpdateRequest, borrowed from it. */
void rank_update_fields_of (const rankUpdateRequest *request,
                            RankUpdateFields *fields);

/* UpdateBatch's arguments (Ranking.UpdateBatch's args struct, 1: request):
 * its UpdateBatchRequest, 1: requests (list<UpdateRequest>), 2: optional
 * with_rank, 3: optional request_id. */
typedef struct
{
  GArray *requests; /* RankUpdateFields, owned */
  gboolean has_with_rank;
  gboolean with_rank;
  char *request_id; /* NULL: unset */
} RankUpdateBatchArgs;

/* Reads UpdateBatch's arguments struct from in (after the message's
 * header); NULL with error set if they do not decode. */
RankUpdateBatchArgs *rank_update_batch_args_read (ThriftProtocol *in,
                                                  GError **error);

void rank_update_batch_args_free (RankUpdateBatchArgs *args);

/* Update's arguments (Ranking.Update's args struct, 1: request): its
 * UpdateRequest. */
RankUpdateFields *rank_update_args_read (ThriftProtocol *in, GError **error);

void rank_update_args_free (RankUpdateFields *args);

/* GetRank's arguments (Ranking.GetRank's args struct, 1: request): its
 * GetRankRequest, 1: board, 2: member, 3: optional periods_back,
 * 4: optional window (1.8). */
typedef struct
{
  char *board;
  char *member;
  gint32 periods_back;
  gboolean window;
} RankGetRankArgs;

RankGetRankArgs *rank_get_rank_args_read (ThriftProtocol *in, GError **error);

void rank_get_rank_args_free (RankGetRankArgs *args);

/* GetTopN's arguments (Ranking.GetTopN's args struct, 1: request): its
 * GetTopNRequest, 1: board, 2: n, 3: optional offset, 4: optional
 * periods_back, 5: optional with_data, 6: optional window (1.8). */
typedef struct
{
  char *board;
  gint32 n;
  gint32 offset;
  gint32 periods_back;
  gboolean with_data;
  gboolean window;
} RankGetTopNArgs;

RankGetTopNArgs *rank_get_top_n_args_read (ThriftProtocol *in, GError **error);

void rank_get_top_n_args_free (RankGetTopNArgs *args);

#endif /* RANK_CODEC_REQUESTS_H */
