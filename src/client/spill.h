/* spill.h -- an external sort: records of any number sorted within a
 * bounded amount of memory, for rankctl import and export.
 *
 * Records are byte strings, each with a sort key of three unsigned 64-bit
 * integers compared in order, then, where all three are equal, by the
 * caller's compare function if one is given (import sorts by member: the
 * key holds the member's first 8 bytes, the function the rest). Records
 * are gathered in memory up to a budget, sorted, and written to a run file
 * when the budget is full; reading merges the runs (and what is still in
 * memory) into one sorted stream. A spill that never filled its budget
 * sorts in memory and writes no file.
 *
 * Run files are made in g_get_tmp_dir () (TMPDIR) and removed from it as
 * soon as they are open, so that nothing is left behind, whatever way the
 * process ends. They take about the records' bytes plus 28 bytes each.
 * More than RANK_SPILL_FAN_IN runs are merged in rounds, RANK_SPILL_FAN_IN
 * at a time, each reading through a buffer of its own.
 *
 * Records with equal keys (and compare equal) come out in the order they
 * were added. Not thread-safe: one thread uses a spill at a time.
 */
#ifndef RANK_SPILL_H
#define RANK_SPILL_H

#include <glib.h>

/* Runs merged at once; and the read buffer of each. */
#define RANK_SPILL_FAN_IN 64
#define RANK_SPILL_READ_BUFFER (64 * 1024)
/* The smallest budget a spill takes (a smaller one is raised to it). */
#define RANK_SPILL_MIN_MEMORY (1024 * 1024)

typedef struct
{
  guint64 k[3];
} RankSpillKey;

/* Orders two records whose keys are equal: < 0, 0, > 0 as a is before, as,
 * or after b. */
typedef int (*RankSpillCompare) (const guint8 *a, gsize a_len, const guint8 *b,
                                 gsize b_len);

typedef struct _RankSpill RankSpill;

/* A spill that holds up to memory bytes of records (and their index) at a
 * time; compare may be NULL. */
RankSpill *rank_spill_new (gsize memory, RankSpillCompare compare);
void rank_spill_free (RankSpill *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (RankSpill, rank_spill_free)

/* Adds a record (copied). FALSE when a run could not be written (the error
 * names the temporary directory); the spill is then of no further use. */
gboolean rank_spill_add (RankSpill *s, const RankSpillKey *key,
                         const guint8 *record, gsize len, GError **error);

/* Records added, and runs written to files (not counting merge rounds). */
guint64 rank_spill_count (const RankSpill *s);
guint rank_spill_runs (const RankSpill *s);

/* Ends the adding and starts the reading. */
gboolean rank_spill_finish (RankSpill *s, GError **error);

/* The next record in order: TRUE with *record (valid until the next call)
 * and *len, or TRUE with *record NULL at the end; FALSE when a run file
 * cannot be read. */
gboolean rank_spill_next (RankSpill *s, RankSpillKey *key,
                          const guint8 **record, gsize *len, GError **error);

/* A key's first integer from the first 8 bytes of s (len bytes), big-endian,
 * zero-padded: keys so made order as the bytes do, up to the 8th. */
guint64 rank_spill_prefix (const char *s, gsize len);

#endif /* RANK_SPILL_H */
