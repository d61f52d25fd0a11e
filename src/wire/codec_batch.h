/* codec_batch.h -- UpdateBatch's request written without the generated
 * structs: rankctl import's encoder, here so that the codec test
 * (tests/test_codec.c) checks it against the generated writer.
 *
 * The generated client builds a GObject for each request, string and
 * result of a call, and a hash table for each record's data: most of
 * rankctl's CPU in an import (perf). These write the same fields through
 * the protocol (binary or compact), in the generated code's order, and
 * leave out the optional fields that are unset, as it does.
 */
#ifndef RANK_CODEC_BATCH_H
#define RANK_CODEC_BATCH_H

#include <thrift/c_glib/protocol/thrift_protocol.h>

#include "codec_requests.h"

/* A field's header (the protocol's field_begin). */
gboolean rank_codec_write_field (ThriftProtocol *out, ThriftType type,
                                 gint16 id, GError **error);

/* A string field of len bytes. */
gboolean rank_codec_write_bytes_field (ThriftProtocol *out, gint16 id,
                                       const char *s, gsize len,
                                       GError **error);

/* An UpdateRequest struct of f's fields; the optional ones unset (has_
 * FALSE, NULL) are left out. */
gboolean rank_codec_write_update (ThriftProtocol *out,
                                  const RankUpdateFields *f, GError **error);

/* An UpdateBatchRequest struct: begin writes up to the header of its list
 * of n requests, the caller then writes them (rank_codec_write_update),
 * and end writes the rest: with_rank when has_with_rank, request_id when
 * not NULL. */
gboolean rank_codec_write_update_batch_begin (ThriftProtocol *out, guint n,
                                              GError **error);
gboolean rank_codec_write_update_batch_end (ThriftProtocol *out,
                                            gboolean has_with_rank,
                                            gboolean with_rank,
                                            const char *request_id,
                                            GError **error);

#endif /* RANK_CODEC_BATCH_H */
