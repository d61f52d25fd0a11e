/* test_command.c -- the numbers and key names rankd writes into Redis
 * commands without printf are the bytes printf wrote. */
#include <string.h>

#include "command.h"
#include "store_private.h"

/* rank_format_int prints what "%" G_GINT64_FORMAT prints: the extremes,
 * around each power of 10, and a spread of others. */
static void
test_format_int (void)
{
  gint64 values[] = { 0,
                      1,
                      -1,
                      9,
                      10,
                      -10,
                      G_MAXINT64,
                      G_MININT64,
                      G_MININT64 + 1,
                      9007199254740991,
                      -9007199254740991 };
  GRand *rand = g_rand_new_with_seed (7);

  for (gsize i = 0; i < G_N_ELEMENTS (values) + 64 * 3 + 1000; i++)
    {
      gint64 v;
      char want[32], got[RANK_FORMAT_INT_MAX];
      gsize len;

      if (i < G_N_ELEMENTS (values))
        v = values[i];
      else if (i < G_N_ELEMENTS (values) + 64 * 3)
        {
          /* 10^k - 1, 10^k and their negatives, while they fit. */
          gsize j = i - G_N_ELEMENTS (values);
          gint64 p = 1;

          for (gsize k = 0; k < j / 3 % 19; k++)
            p *= 10;
          v = (j % 3 == 0 ? p - 1 : p) * (j % 3 == 2 ? -1 : 1);
        }
      else
        v = (gint64) (((guint64) g_rand_int (rand) << 32) | g_rand_int (rand))
            >> g_rand_int_range (rand, 0, 63);
      g_snprintf (want, sizeof want, "%" G_GINT64_FORMAT, v);
      len = rank_format_int (got, v);
      g_assert_cmpstr (got, ==, want);
      g_assert_cmpuint (len, ==, strlen (want));
    }
  g_rand_free (rand);
}

/* A board's key under its own tag, the longest board name included. */
static void
test_board_key (void)
{
  char key[RANK_STORE_KEY_MAX];
  char board[RANK_BOARD_MAX_BYTES + 1];

  g_assert_cmpuint (store_board_key (key, "weekly", "z"), ==,
                    strlen ("rk:{weekly}:z"));
  g_assert_cmpstr (key, ==, "rk:{weekly}:z");
  memset (board, 'b', RANK_BOARD_MAX_BYTES);
  board[RANK_BOARD_MAX_BYTES] = '\0';
  g_assert_cmpuint (store_board_key (key, board, "qc"), ==,
                    RANK_BOARD_MAX_BYTES + strlen ("rk:{}:qc"));
  g_assert_true (g_str_has_suffix (key, "b}:qc"));
}

/* An empty argument without bytes (an empty GByteArray's data is NULL):
 * one argument of length 0, with nothing copied (the sanitizer build
 * stops at a memcpy from NULL). */
static void
test_empty_argument (void)
{
  g_autoptr (GByteArray) none = g_byte_array_new ();
  RankCommand cmd;

  rank_command_init (&cmd, "XACK");
  rank_command_add (&cmd, none->data, none->len);
  rank_command_add_str (&cmd, "x");
  g_assert_cmpint (cmd.argc, ==, 3);
  g_assert_cmpuint (cmd.len[1], ==, 0);
  g_assert_cmpmem (cmd.bytes + cmd.offset[2], cmd.len[2], "x", 1);
  rank_command_clear (&cmd);
}

/* Appended bytes lengthen the last argument, also past the inline buffer
 * (update.lua's second argument of an update ends with its data). */
static void
test_append (void)
{
  g_autofree char *big = g_strnfill (RANK_COMMAND_INLINE_BYTES, 'd');
  RankCommand cmd;

  rank_command_init_args (&cmd);
  rank_command_add_str (&cmd, "m");
  rank_command_add_str (&cmd, "ab");
  rank_command_append (&cmd, "cd", 2);
  rank_command_append (&cmd, big, RANK_COMMAND_INLINE_BYTES);
  rank_command_add_str (&cmd, "e");
  g_assert_cmpint (cmd.argc, ==, 3);
  g_assert_cmpmem (cmd.bytes + cmd.offset[0], cmd.len[0], "m", 1);
  g_assert_cmpuint (cmd.len[1], ==, 4 + RANK_COMMAND_INLINE_BYTES);
  g_assert_cmpmem (cmd.bytes + cmd.offset[1], 4, "abcd", 4);
  g_assert_cmpmem (cmd.bytes + cmd.offset[1] + 4, RANK_COMMAND_INLINE_BYTES,
                   big, RANK_COMMAND_INLINE_BYTES);
  g_assert_cmpmem (cmd.bytes + cmd.offset[2], cmd.len[2], "e", 1);
  rank_command_clear (&cmd);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/command/format-int", test_format_int);
  g_test_add_func ("/command/board-key", test_board_key);
  g_test_add_func ("/command/empty-argument", test_empty_argument);
  g_test_add_func ("/command/append", test_append);
  return g_test_run ();
}
