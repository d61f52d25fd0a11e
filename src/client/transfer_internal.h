/* transfer_internal.h -- what the parts of export and import share:
 * transfer_format.c (the file formats), transfer_calls.c (import's
 * UpdateBatch calls), transfer_import.c and transfer_export.c. Not for
 * rankctl or the tests: transfer.h is the API.
 */
#ifndef RANK_TRANSFER_INTERNAL_H
#define RANK_TRANSFER_INTERNAL_H

#include "transfer.h"

/* rank_transfer_entry_free as a GDestroyNotify. */
void rank_transfer_entry_destroy (gpointer p);

/* The answer of a failed call as a GError: rankd's exception, or the
 * transport's error. Takes the exceptions. Returns FALSE. */
gboolean rank_transfer_call_failed (GObject *invalid, GObject *unavailable,
                                    GObject *not_found, GObject *denied,
                                    GError *transport, GError **error);

/* One UpdateBatch call in flight: its records (indexes into the file's
 * entries), and the group they are when the call is recorded as a whole. */
typedef struct
{
  GArray *index; /* guint: into the file's entries */
  gint group;    /* -1: none */
} RankImportFlight;

/* What an UpdateBatch call takes besides its records, at most, in the
 * binary protocol: the message header (12 bytes and the name), the
 * argument and request structs' fields, the list header, with_rank, a
 * group's request id (under 60 bytes) and the stops: under 100 bytes. The
 * compact protocol takes no more than the binary one for anything. */
#define RANK_IMPORT_CALL_OVERHEAD 128

/* The bytes record e takes in an UpdateBatch call to board (board_len
 * bytes), at most: its UpdateRequest in the binary protocol. */
gsize rank_import_record_size (gsize board_len, const RankTransferEntry *e);

/* Whether every record fits in a call of its own within max_frame; the
 * error names the first that does not by its line. */
gboolean rank_import_records_fit (const char *board, GPtrArray *entries,
                                  GArray *lines, guint32 max_frame,
                                  GError **error);

/* How many of the records listed in todo from next on go in the next
 * call: up to most, as many as fit in max_frame (one at least). */
guint rank_import_records_that_fit (const char *board, GPtrArray *entries,
                                    GArray *todo, guint next, guint most,
                                    guint32 max_frame);

/* Sends the records of f as one UpdateBatch (corked by the caller). */
gboolean rank_import_send_flight (RankClient *client, const char *board,
                                  GPtrArray *entries, const char *digest,
                                  const RankImportFlight *f, GError **error);

/* Reads f's answer: counts applied, repeated and refused records; the
 * Unavailable ones go to retry, a group's records held back by another's
 * refusal to held. */
gboolean rank_import_recv_flight (RankClient *client, GPtrArray *entries,
                                  GArray *lines, const RankImportFlight *f,
                                  GArray *retry, GArray *held,
                                  RankImportStats *stats, GError **error);

#endif /* RANK_TRANSFER_INTERNAL_H */
