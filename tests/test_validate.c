/* test_validate.c -- name, score and timestamp rules, and their messages. */
#include <string.h>

#include "error.h"
#include "harness.h"
#include "constants.h"
#include "validate.h"

/* Asserts that check fails with INVALID and a message containing want. */
#define ASSERT_INVALID(call, want)                                             \
  do                                                                           \
    {                                                                          \
      g_autoptr (GError) e_ = NULL;                                            \
      GError **error = &e_;                                                    \
      g_assert_false (call);                                                   \
      g_assert_error (e_, RANK_ERROR, RANK_ERROR_INVALID);                     \
      if (strstr (e_->message, want) == NULL)                                  \
        g_error ("message '%s' lacks '%s'", e_->message, want);                \
    }                                                                          \
  while (0)

static void
test_board (void)
{
  g_autofree char *max = rank_test_repeat ('b', RANK_BOARD_MAX_BYTES);
  g_autofree char *over = rank_test_repeat ('b', RANK_BOARD_MAX_BYTES + 1);

  g_assert_true (rank_validate_board ("run_hero:daily", NULL));
  g_assert_true (rank_validate_board (max, NULL));
  g_assert_true (rank_validate_board ("\xe6\x97\xa5\xe6\x9c\xac", NULL));
  ASSERT_INVALID (rank_validate_board (over, error),
                  "board: must be 1-200 bytes, got 201");
  ASSERT_INVALID (rank_validate_board ("", error),
                  "board: must be 1-200 bytes");
  ASSERT_INVALID (rank_validate_board ("a{b", error), "'{' or '}'");
  ASSERT_INVALID (rank_validate_board ("ab}", error), "'{' or '}'");
  ASSERT_INVALID (rank_validate_board ("a\tb", error), "control characters");
  ASSERT_INVALID (rank_validate_board ("a\x7f", error), "control characters");
  ASSERT_INVALID (rank_validate_board ("a\xc2\x85", error),
                  "control characters");
  ASSERT_INVALID (rank_validate_board ("a\xff", error), "valid UTF-8");
}

static void
test_member_and_request_id (void)
{
  g_autofree char *m = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES);
  g_autofree char *m_over = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES + 1);
  g_autofree char *r = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES);
  g_autofree char *r_over
      = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES + 1);

  g_assert_true (rank_validate_member (m, NULL));
  g_assert_true (rank_validate_member ("{braces} are fine in members", NULL));
  g_assert_true (rank_validate_request_id (r, NULL));
  ASSERT_INVALID (rank_validate_member (m_over, error),
                  "member: must be 1-256 bytes, got 257");
  ASSERT_INVALID (rank_validate_member ("", error), "member");
  ASSERT_INVALID (rank_validate_member ("bad\xc3", error),
                  "member: must be valid UTF-8");
  ASSERT_INVALID (rank_validate_request_id (r_over, error),
                  "request_id: must be 1-128 bytes, got 129");
  ASSERT_INVALID (rank_validate_request_id (NULL, error), "request_id");
}

static void
test_score_and_time (void)
{
  g_assert_true (rank_validate_score ("value", RANK_SCORE_MAX, NULL));
  g_assert_true (rank_validate_score ("value", -RANK_SCORE_MAX, NULL));
  ASSERT_INVALID (rank_validate_score ("value", RANK_SCORE_MAX + 1, error),
                  "value: 9007199254740992 is outside");
  ASSERT_INVALID (rank_validate_score ("value", G_MININT64, error), "value");
  g_assert_true (rank_validate_timestamp ("timestamp_ms", 0, NULL));
  g_assert_true (
      rank_validate_timestamp ("timestamp_ms", RANK_TIMESTAMP_MAX_MS, NULL));
  ASSERT_INVALID (rank_validate_timestamp ("timestamp_ms", -1, error),
                  "timestamp_ms: -1 is outside");
  ASSERT_INVALID (rank_validate_timestamp ("timestamp_ms",
                                           RANK_TIMESTAMP_MAX_MS + 1, error),
                  "2200-12-31");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/validate/board", test_board);
  g_test_add_func ("/validate/member-and-request-id",
                   test_member_and_request_id);
  g_test_add_func ("/validate/score-and-timestamp", test_score_and_time);
  return g_test_run ();
}
