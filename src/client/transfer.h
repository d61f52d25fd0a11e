/* transfer.h -- a board's entries to a file and back: rankctl export and
 * import.
 *
 * Each entry carries what reproduces a member's place: member, score, the
 * time it reached the score (the tie-break), subscores and data. Written
 * sorted by member id, bytewise (rank_transfer_format_entry), a set of
 * entries has one byte form.
 *
 * Export reads a board with Export, a page at a time while it keeps taking
 * updates, keeps each member's latest entry (one updated meanwhile can come
 * twice) and writes them so.
 *
 * Import sends such a file with UpdateBatch, 1000 entries a call, each a SET
 * of the score at the exported time, with a request id made of the file's
 * SHA-256 and the entry's number: an import stopped half-way and run again
 * applies every entry once. Into a board that allows it (not sharded,
 * capped, dense-ranked or periodic: GetBoardInfo says), it sends them
 * RANK_TRANSFER_GROUP a call instead, each call recorded as a whole
 * (UpdateBatchRequest.request_id: the file's SHA-256 and the call's first
 * entry), which costs Redis about half as much an entry; the calls are
 * made the same way from the same file every time, and a call answered
 * Unavailable is sent again as it was. Entries go in score order (each
 * member's records together, in the file's order): a sorted set takes
 * neighbours faster than scattered scores. Exported, imported into an
 * empty board and exported again, a board gives the same bytes.
 *
 * Both run in bounded memory whatever the board's or the file's size:
 * what they put in order goes through an external sort (spill.h) of
 * `memory` bytes (RANK_TRANSFER_SORT_MEMORY by default), which writes runs
 * to temporary files beyond that.
 *
 * Formats (one header line in CSV; none in JSON Lines):
 *   csv    member,score,timestamp_ms,subscores,data
 *          member and data always quoted ("" inside), subscores as 1;2;3,
 *          data as a JSON object; both empty when the entry has none.
 *          A quoted member may span lines.
 *   jsonl  {"member":"m","score":1,"timestamp_ms":2,"subscores":[..],
 *          "data":{..}}, subscores and data left out when none.
 */
#ifndef RANK_TRANSFER_H
#define RANK_TRANSFER_H

#include <stdio.h>

#include "client.h"

typedef enum
{
  RANK_TRANSFER_CSV,
  RANK_TRANSFER_JSONL,
} RankTransferFormat;

#define RANK_TRANSFER_CSV_HEADER "member,score,timestamp_ms,subscores,data"

/* Entries per UpdateBatch call; connections import uses (rankd decodes
 * one UpdateBatch of a connection at a time); calls in flight on each. */
#define RANK_TRANSFER_BATCH 1000
#define RANK_TRANSFER_CONNECTIONS 4
#define RANK_TRANSFER_IN_FLIGHT 2
/* Entries per call recorded as a whole (at most RANK_GROUP_MAX_ITEMS), and
 * calls in flight on each connection then. */
#define RANK_TRANSFER_GROUP 250
#define RANK_TRANSFER_GROUPS_IN_FLIGHT 16

/* The external sort's memory, by default (rankctl --sort-memory). */
#define RANK_TRANSFER_SORT_MEMORY (256 * 1024 * 1024)

typedef struct
{
  char *member;
  gint64 score;
  gint64 timestamp_ms;
  GArray *subscores; /* gint64; NULL: none */
  GHashTable *data;  /* string -> string; NULL: none */
} RankTransferEntry;

void rank_transfer_entry_clear (RankTransferEntry *e);
/* Clears e and frees it. */
void rank_transfer_entry_free (RankTransferEntry *e);

/* "csv" or "jsonl". */
gboolean rank_transfer_format_parse (const char *text, RankTransferFormat *out);

/* The format a file name's extension implies (.csv, .jsonl); FALSE if it
 * implies none. */
gboolean rank_transfer_format_of_path (const char *path,
                                       RankTransferFormat *out);

/* One entry as a record of format, with its line end. */
void rank_transfer_format_entry (GString *out, RankTransferFormat format,
                                 const RankTransferEntry *e);

/* Reads records from text: a reader over the whole file. */
typedef struct
{
  RankTransferFormat format;
  const char *p, *end;
  guint64 line;   /* of p, 1-based */
  guint64 record; /* records read, the header not counted */
} RankTransferReader;

void rank_transfer_reader_init (RankTransferReader *r,
                                RankTransferFormat format, const char *text,
                                gsize len);

/* The next record into e (cleared first): TRUE with *done FALSE; TRUE with
 * *done TRUE at the end; FALSE on a malformed record, error naming its line
 * and field. */
gboolean rank_transfer_read (RankTransferReader *r, RankTransferEntry *e,
                             gboolean *done, GError **error);

typedef struct
{
  guint64 records;  /* in the file */
  guint64 applied;  /* applied by this run */
  guint64 repeated; /* applied before (an earlier run of the same file) */
  guint64 refused;  /* InvalidArgument, each printed with its line */
} RankImportStats;

/* Called after each answered call (progress). */
typedef void (*RankImportProgress) (const RankImportStats *stats,
                                    gpointer data);

/* Import: every record of the file at path into board, sorted within
 * memory bytes. Refused records are printed on stderr with their line and
 * counted; a record that meets Unavailable is sent again (same request id)
 * up to 5 times. FALSE on a malformed file (nothing sent), or when rankd
 * stays out of reach. */
gboolean rank_transfer_import (RankClient *client, const char *board,
                               const char *path, RankTransferFormat format,
                               guint32 max_frame, gsize memory,
                               RankImportProgress progress,
                               gpointer progress_data, RankImportStats *stats,
                               GError **error);

/* ---- export ---- */

/* Entries per Export call: a page of 1000 took Redis 12-14 ms (one
 * script reading each member's entry and data), over the 10 ms that any
 * one command should take on a big board (bench/bigboard.sh). */
#define RANK_TRANSFER_EXPORT_PAGE 500

/* entries: member -> RankTransferEntry (the key is the entry's member).
 * Keeps e, or the entry already there if that one has the later time (a
 * member updated during an export can come twice; on equal times the
 * later seen stays). TRUE if e was kept; else it is freed. */
gboolean rank_transfer_keep_latest (GHashTable *entries, RankTransferEntry *e);

/* entries (as above) in format, sorted by member bytewise, the CSV header
 * first: one set of entries has one byte form. */
void rank_transfer_write (GString *out, RankTransferFormat format,
                          GHashTable *entries);

typedef struct
{
  guint64 pages;
  guint64 read;       /* entries in the pages */
  guint64 superseded; /* of a member that came again, later */
  guint64 entries;    /* written */
} RankExportStats;

/* Called after each page (progress). */
typedef void (*RankExportProgress) (const RankExportStats *stats,
                                    gpointer data);

/* Export: every entry of board (periods_back periods before the current
 * one), page after page while the board keeps taking updates, sorted
 * within memory bytes, written to out in format once the last page is
 * in. */
gboolean rank_transfer_export (RankClient *client, const char *board,
                               gint32 periods_back, RankTransferFormat format,
                               gsize memory, FILE *out,
                               RankExportProgress progress,
                               gpointer progress_data, RankExportStats *stats,
                               GError **error);

#endif /* RANK_TRANSFER_H */
