/* topreader.h -- rank-bench's reader of GetTopN replies: the binary
 * protocol's bytes of one message, checked in place.
 *
 * The generated c_glib client builds a GObject per Entry (and per string),
 * about a microsecond each: for GetTopN(100) that is most of a call's CPU,
 * spent on the cores rankd and Redis share with the load generator. This
 * reader walks the same bytes without allocating and checks what a caller
 * would rely on: a reply (not an exception) to GetTopN, a list of Entry
 * structs, each with a non-empty member, a score and a rank, ranks in
 * order. Anything else is refused with the reason.
 */
#ifndef RANK_BENCH_TOPREADER_H
#define RANK_BENCH_TOPREADER_H

#include <glib.h>

/* Reads the message in bytes[0, len): a GetTopN reply in the binary
 * protocol. Returns TRUE with the number of entries in *entries; FALSE
 * with why (an exception's message, or what is malformed) in *why, to be
 * g_free()d. */
gboolean rank_bench_read_top (const guint8 *bytes, gsize len, gsize *entries,
                              char **why);

#endif /* RANK_BENCH_TOPREADER_H */
