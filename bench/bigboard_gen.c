/* bigboard_gen.c -- bigboard-gen: the entries of bench/bigboard.sh, streamed.
 *
 * Usage: bigboard-gen MEMBERS csv          > FILE   (export's own form)
 *        bigboard-gen MEMBERS zadd KEY     | redis-cli --pipe
 *
 * Members m0 .. m<MEMBERS-1>, written sorted by member id bytewise (a
 * pre-order walk of the decimal digits: "m1" < "m10" < "m100" < "m11"),
 * each with a score and a time that are a function of its number only
 * (splitmix64: every run, and both forms, give the same ones), and data
 * {"name":"player mN"} on every tenth, in the form of bench/import_gen.py:
 * the same bytes as rankctl export writes. The zadd form is the same members
 * and scores as ZADD KEY commands of 64 members each (RESP), for a plain
 * sorted set beside rankd's board. Memory is bounded; 50M lines take
 * seconds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t members;
static int zadd;
static const char *key;
static char pending[64][64]; /* the ZADD being built: "score member" pairs */
static char pending_score[64][24];
static int npending;

static uint64_t
splitmix64 (uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static void
flush_zadd (void)
{
  if (npending == 0)
    return;
  printf ("*%d\r\n$4\r\nZADD\r\n$%zu\r\n%s\r\n", 2 + 2 * npending, strlen (key),
          key);
  for (int i = 0; i < npending; i++)
    printf ("$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen (pending_score[i]),
            pending_score[i], strlen (pending[i]), pending[i]);
  npending = 0;
}

static void
emit (uint64_t n)
{
  uint64_t r1 = splitmix64 (2 * n), r2 = splitmix64 (2 * n + 1);
  /* Scores in [-10^12, 10^12] and times in [1.7e12, 1.7e12 + 10^9], as
   * import_gen.py's. */
  int64_t score = (int64_t) (r1 % 2000000000001ULL) - 1000000000000LL;
  uint64_t ms = 1700000000000ULL + r2 % 1000000001ULL;

  if (zadd)
    {
      snprintf (pending_score[npending], sizeof pending_score[0], "%" PRId64,
                score);
      snprintf (pending[npending], sizeof pending[0], "m%" PRIu64, n);
      if (++npending == 64)
        flush_zadd ();
    }
  else if (n % 10 == 0)
    printf ("\"m%" PRIu64 "\",%" PRId64 ",%" PRIu64
            ",,\"{\"\"name\"\":\"\"player m%" PRIu64 "\"\"}\"\n",
            n, score, ms, n);
  else
    printf ("\"m%" PRIu64 "\",%" PRId64 ",%" PRIu64 ",,\n", n, score, ms);
}

/* n and then every number < members whose decimal digits begin with n's, in
 * bytewise order. */
static void
walk (uint64_t n)
{
  emit (n);
  if (n == 0 || n > (members - 1) / 10)
    return;
  for (uint64_t d = 0; d < 10 && n * 10 + d < members; d++)
    walk (n * 10 + d);
}

int
main (int argc, char **argv)
{
  static char buf[1 << 20];

  if (argc < 3
      || (strcmp (argv[2], "csv") != 0 && strcmp (argv[2], "zadd") != 0)
      || (strcmp (argv[2], "zadd") == 0 && argc < 4))
    {
      fprintf (stderr, "usage: bigboard-gen MEMBERS csv | MEMBERS zadd KEY\n");
      return 2;
    }
  members = strtoull (argv[1], NULL, 10);
  zadd = strcmp (argv[2], "zadd") == 0;
  key = zadd ? argv[3] : NULL;
  setvbuf (stdout, buf, _IOFBF, sizeof buf);
  if (!zadd)
    printf ("member,score,timestamp_ms,subscores,data\n");
  for (uint64_t d = 0; d < 10 && d < members; d++)
    walk (d);
  flush_zadd ();
  return fflush (stdout) == 0 ? 0 : 1;
}
