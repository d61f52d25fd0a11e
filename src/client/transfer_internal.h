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

/* ---- an entry as bytes, for the external sort (spill.h) ---- */

/* e as bytes into out (emptied first): its member first (4 bytes of
 * length, then its bytes), then number and line (8 bytes each), then the
 * rest. In this process's byte order: the bytes never leave it. */
void rank_transfer_entry_pack (GByteArray *out, const RankTransferEntry *e,
                               guint64 number, guint64 line);
/* The entry packed at p into e (cleared first), with its number and line;
 * its member into member (rank_transfer_packed_member_len + 1 bytes, the
 * caller's: e->member is then not to be freed), or a new string if
 * NULL. */
void rank_transfer_entry_unpack (const guint8 *p, RankTransferEntry *e,
                                 char *member, guint64 *number, guint64 *line);
gsize rank_transfer_packed_member_len (const guint8 *p);
/* Orders packed entries by member bytewise, then number (a
 * RankSpillCompare). */
int rank_transfer_pack_compare (const guint8 *a, gsize a_len, const guint8 *b,
                                gsize b_len);

/* ---- import's calls ---- */

/* A record of the file, read: its entry, its number (from 1: its request
 * id's) and its line; its member in the same allocation. */
typedef struct
{
  RankTransferEntry entry;
  guint64 number;
  guint64 line;
  char member[];
} RankImportRecord;

/* A record of the entry packed at p. */
RankImportRecord *rank_import_record_unpack (const guint8 *p);
void rank_import_record_free (gpointer p);

/* One UpdateBatch call: its records (RankImportRecord *, owned), whether
 * it is recorded as a whole (named by its first record's number and its
 * size), and how often it met Unavailable. */
typedef struct
{
  GPtrArray *records;
  gboolean group;
  guint attempts;
} RankImportCall;

RankImportCall *rank_import_call_new (gboolean group);
void rank_import_call_free (gpointer p);

/* What an UpdateBatch call takes besides its records, at most, in the
 * binary protocol: the message header (12 bytes and the name), the
 * argument and request structs' fields, the list header, with_rank, a
 * group's request id (under 60 bytes) and the stops: under 100 bytes. The
 * compact protocol takes no more than the binary one for anything. */
#define RANK_IMPORT_CALL_OVERHEAD 128

/* The bytes record e takes in an UpdateBatch call to board (board_len
 * bytes), at most: its UpdateRequest in the binary protocol. */
gsize rank_import_record_size (gsize board_len, const RankTransferEntry *e);

/* Sends call as one UpdateBatch (corked by the caller). */
gboolean rank_import_send_call (RankClient *client, const char *board,
                                const char *digest, const RankImportCall *call,
                                GError **error);

/* Reads call's answer: counts applied, repeated and refused records
 * (refused ones printed with their line). Returns in *retry what is to be
 * sent again for Unavailable (the call itself if a group: the caller then
 * keeps call; else a call of those records, taken from call), and in *held
 * a group of the records of a group held back by another's refusal (taken
 * from call); both NULL when none. */
gboolean rank_import_recv_call (RankClient *client, RankImportCall *call,
                                RankImportCall **retry, RankImportCall **held,
                                RankImportStats *stats, GError **error);

#endif /* RANK_TRANSFER_INTERNAL_H */
