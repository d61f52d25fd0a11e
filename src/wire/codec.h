/* codec.h -- the IDL structs rankd writes by hand, from plain C values.
 *
 * The generated writers need a GObject per struct (and a copy of every
 * string): a page of 1000 entries was 1000 GObjects, and an import's
 * UpdateBatch four per update, a good part of rankd's CPU (perf). These
 * writers put the same bytes as the generated ones (thrift -gen c_glib of
 * the IDL in api.h) in either protocol; in the binary protocol the
 * commonest shapes go out in one transport write, the protocol's
 * field-by-field writes having been a fifth of rankd's instructions on
 * those paths (callgrind).
 *
 * Each writer names below the IDL struct it writes and the fields it
 * writes: when the IDL gives one of them a field, its writer here (and,
 * for the requests, its reader in codec_requests.c) must learn it, and
 * tests/test_codec.c compares them with the generated code.
 *
 * The values are plain: this layer sees neither the store nor the
 * methods, which fill these structs from their own.
 */
#ifndef RANK_CODEC_H
#define RANK_CODEC_H

#include <thrift/c_glib/protocol/thrift_protocol.h>

#include "memberdata.h"
#include "row.h"

G_BEGIN_DECLS

/* ---- a method's reply ---- */

/* The start of the reply to method (seqid) whose result has a success
 * field: the message header (T_REPLY), the method's generated result
 * struct ("{Method}_result") and its field 0 (success) of type. The
 * caller then writes success's value (a struct: one of the writers below;
 * a list: its header, its elements and its end). */
gboolean rank_codec_write_reply_begin (ThriftProtocol *out, const char *method,
                                       gint32 seqid, ThriftType type,
                                       GError **error);

/* The end of that reply: field 0's end, the result's stop and end, the
 * message's end; then flushes it (which ends a RankReplyWriter's frame). */
gboolean rank_codec_write_reply_end (ThriftProtocol *out, GError **error);

/* ---- UpdateResponse (Update's success, an UpdateResult's response) ---- */

/* IDL UpdateResponse: 1: i64 score; 2: optional i64 rank (written when
 * rank > 0); 3: bool applied; 4: optional list<i64> subscores (written when
 * n_subscores > 0). */
typedef struct
{
  gint64 score;
  gint64 rank; /* 0: not ranked, left out */
  gboolean applied;
  guint n_subscores; /* 0: left out */
  const gint64 *subscores;
} RankCodecUpdateResponse;

gboolean rank_codec_write_update_response (ThriftProtocol *out,
                                           const RankCodecUpdateResponse *r,
                                           GError **error);

/* ---- UpdateResult (one update of UpdateBatch) ---- */

/* Which field of an UpdateResult is set: its id in the IDL. */
typedef enum
{
  RANK_CODEC_UPDATE_RESPONSE = 1,    /* 1: UpdateResponse response */
  RANK_CODEC_UPDATE_INVALID = 2,     /* 2: InvalidArgument invalid */
  RANK_CODEC_UPDATE_UNAVAILABLE = 3, /* 3: Unavailable unavailable */
} RankCodecUpdateResultField;

/* IDL UpdateResult: exactly one of 1: response, 2: invalid, 3: unavailable;
 * the exceptions' one field, 1: string message. */
typedef struct
{
  RankCodecUpdateResultField field;
  RankCodecUpdateResponse response; /* field RANK_CODEC_UPDATE_RESPONSE */
  const char *message;              /* the others */
} RankCodecUpdateResult;

gboolean rank_codec_write_update_result (ThriftProtocol *out,
                                         const RankCodecUpdateResult *r,
                                         GError **error);

/* IDL UpdateBatchResponse: 1: list<UpdateResult> results, results[0..n). */
gboolean
rank_codec_write_update_batch_response (ThriftProtocol *out,
                                        const RankCodecUpdateResult *results,
                                        guint n, GError **error);

/* ---- Entry (GetRank's success, an element of GetTopN's, GetAround's,
 * Sample's) ---- */

/* IDL Entry from a row: 1: string member; 2: i64 score; 3: i64 rank;
 * 4: optional list<i64> subscores (written when n_subscores > 0);
 * 5: optional map<string, string> data (written when the row has data, its
 * pairs in their stored order; an encoding that does not parse is left
 * out, with a warning, rather than fail the page). */
gboolean rank_codec_write_entry (ThriftProtocol *out, const RankRow *row,
                                 GError **error);

/* A list<Entry> of the n rows: the list's header, each row as
 * rank_codec_write_entry writes it, the list's end. */
gboolean rank_codec_write_entries (ThriftProtocol *out, const RankRow *rows,
                                   gsize n, GError **error);

G_END_DECLS

#endif /* RANK_CODEC_H */
