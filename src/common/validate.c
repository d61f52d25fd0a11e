/* validate.c -- name, score and timestamp rules (see validate.h, constants.h).
 *
 * Strings arrive from the protocol layer NUL-terminated; an embedded NUL was
 * replaced there by the byte 0xFF, which is never valid UTF-8, so "valid
 * UTF-8" here also means "had no NUL on the wire".
 */
#include "validate.h"

#include <string.h>

#include "error.h"
#include "constants.h"

static gboolean
check_text (const char *field, const char *value, gsize max_bytes,
            GError **error)
{
  gsize len;

  if (value == NULL || value[0] == '\0')
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: must be 1-%zu bytes, got an empty string", field,
                   max_bytes);
      return FALSE;
    }
  len = strlen (value);
  if (len > max_bytes)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: must be 1-%zu bytes, got %zu bytes", field, max_bytes,
                   len);
      return FALSE;
    }
  if (!g_utf8_validate (value, (gssize) len, NULL))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: must be valid UTF-8 without NUL bytes", field);
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_validate_board (const char *board, GError **error)
{
  const char *p;

  if (!check_text ("board", board, RANK_BOARD_MAX_BYTES, error))
    return FALSE;
  for (p = board; *p; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      /* '{' and '}' are kept for the Redis Cluster hash tag around the board
       * name in every key; control characters make keys unreadable. */
      if (c == '{' || c == '}')
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "board: must not contain '{' or '}' (offset %td)",
                       p - board);
          return FALSE;
        }
      if (g_unichar_iscntrl (c))
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "board: must not contain control characters "
                       "(U+%04X at offset %td)",
                       c, p - board);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
rank_validate_member (const char *member, GError **error)
{
  return check_text ("member", member, RANK_MEMBER_MAX_BYTES, error);
}

gboolean
rank_validate_request_id (const char *request_id, GError **error)
{
  return check_text ("request_id", request_id, RANK_REQUEST_ID_MAX_BYTES,
                     error);
}

gboolean
rank_validate_score (const char *field, gint64 value, GError **error)
{
  if (value > RANK_SCORE_MAX || value < -RANK_SCORE_MAX)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: %" G_GINT64_FORMAT " is outside the exact range "
                   "-%" G_GINT64_FORMAT "..%" G_GINT64_FORMAT " (2^53-1)",
                   field, value, RANK_SCORE_MAX, RANK_SCORE_MAX);
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_validate_timestamp (const char *field, gint64 ms, GError **error)
{
  if (ms < RANK_TIMESTAMP_MIN_MS || ms > RANK_TIMESTAMP_MAX_MS)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: %" G_GINT64_FORMAT " is outside %" G_GINT64_FORMAT
                   "..%" G_GINT64_FORMAT
                   " (Unix ms, 1970-01-01 to 2200-12-31 UTC)",
                   field, ms, RANK_TIMESTAMP_MIN_MS, RANK_TIMESTAMP_MAX_MS);
      return FALSE;
    }
  return TRUE;
}
