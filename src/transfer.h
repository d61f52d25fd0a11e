/* transfer.h -- a file of entries into a board: rankctl import.
 *
 * Each entry carries what reproduces a member's place: member, score, the
 * time it reached the score (the tie-break), subscores and data. Written
 * sorted by member id, bytewise (rank_transfer_format_entry), a set of
 * entries has one byte form.
 *
 * Import sends such a file with UpdateBatch, 1000 entries a call, each a SET
 * of the score at the exported time, with a request id made of the file's
 * SHA-256 and the entry's number: an import stopped half-way and run again
 * applies every entry once.
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

typedef struct
{
  char *member;
  gint64 score;
  gint64 timestamp_ms;
  GArray *subscores; /* gint64; NULL: none */
  GHashTable *data;  /* string -> string; NULL: none */
} RankTransferEntry;

void rank_transfer_entry_clear (RankTransferEntry *e);

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

/* Import: every record of the file at path into board. Refused records are
 * printed on stderr with their line and counted; a record that meets
 * Unavailable is sent again (same request id) up to 5 times. FALSE on a
 * malformed file (nothing sent), or when rankd stays out of reach. */
gboolean rank_transfer_import (RankClient *client, const char *board,
                               const char *path, RankTransferFormat format,
                               RankImportProgress progress,
                               gpointer progress_data, RankImportStats *stats,
                               GError **error);

#endif /* RANK_TRANSFER_H */
