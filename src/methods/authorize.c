/* authorize.c -- whether a call's caller may make it (access.h): the role
 * its method needs (the method table's), on every board its request names,
 * checked once its arguments are read and before it starts. A refused call
 * changes nothing and answers PermissionDenied, naming the method, the
 * board, the role and the identity. DeleteBoard and ResetBoard, allowed or
 * not, leave one audit line in the log when they end.
 */
#include "handler_private.h"

#include <string.h>

#include "error.h"

/* What a refusal names of the caller's strings (they reach the reply, whose
 * size the method table bounds, and the log): a board's name at its limit,
 * an identity to here. */
#define SHOWN_IDENTITY_BYTES 64

/* The i-th board call's request names (0 first; several for UpdateBatch
 * and Enqueue, repeats included); NULL past the last. A name may be NULL
 * (not given): the method's own checks refuse it. *more is set when the
 * i-th exists. */
static const char *
board_of (const Call *call, guint i, gboolean *more)
{
#define ONE(ArgsType)                                                          \
  (*more = i == 0, i == 0 && ((const ArgsType *) call->args)->request != NULL  \
                       ? ((const ArgsType *) call->args)->request->board       \
                       : NULL)

  *more = FALSE;
  switch (call->method)
    {
    case METHOD_UPDATE:
      *more = i == 0;
      return i == 0 ? ((const RankUpdateFields *) call->plain_args)->board
                    : NULL;
    case METHOD_GET_RANK:
      *more = i == 0;
      return i == 0 ? ((const RankGetRankArgs *) call->plain_args)->board
                    : NULL;
    case METHOD_GET_TOP_N:
      *more = i == 0;
      return i == 0 ? ((const RankGetTopNArgs *) call->plain_args)->board
                    : NULL;
    case METHOD_UPDATE_BATCH:
      {
        const GArray *requests
            = ((const RankUpdateBatchArgs *) call->plain_args)->requests;

        *more = requests != NULL && i < requests->len;
        return *more ? g_array_index (requests, RankUpdateFields, i).board
                     : NULL;
      }
    case METHOD_ENQUEUE:
      {
        const rankEnqueueRequest *r
            = ((const rankRankingEnqueueArgs *) call->args)->request;
        const GPtrArray *requests = r != NULL ? r->requests : NULL;

        *more = requests != NULL && i < requests->len;
        return *more ? ((const rankUpdateRequest *) requests->pdata[i])->board
                     : NULL;
      }
    case METHOD_GET_AROUND:
      return ONE (rankRankingGetAroundArgs);
    case METHOD_GET_RANKS:
      return ONE (rankRankingGetRanksArgs);
    case METHOD_REMOVE:
      return ONE (rankRankingRemoveArgs);
    case METHOD_COUNT:
      return ONE (rankRankingCountArgs);
    case METHOD_COUNT_BETWEEN:
      return ONE (rankRankingCountBetweenArgs);
    case METHOD_GET_PERCENTILE:
      return ONE (rankRankingGetPercentileArgs);
    case METHOD_GET_SCORE_AT_PERCENTILE:
      return ONE (rankRankingGetScoreAtPercentileArgs);
    case METHOD_SAMPLE:
      return ONE (rankRankingSampleArgs);
    case METHOD_SET_MEMBER_DATA:
      return ONE (rankRankingSetMemberDataArgs);
    case METHOD_GET_MEMBER_DATA:
      return ONE (rankRankingGetMemberDataArgs);
    case METHOD_GET_BOARD_INFO:
      return ONE (rankRankingGetBoardInfoArgs);
    case METHOD_DELETE_BOARD:
      return ONE (rankRankingDeleteBoardArgs);
    case METHOD_RESET_BOARD:
      return ONE (rankRankingResetBoardArgs);
    case METHOD_EXPORT:
      return ONE (rankRankingExportArgs);
    case METHOD_GET_QUEUE_STATUS:
      return ONE (rankRankingGetQueueStatusArgs);
    case METHOD_GET_SERVER_INFO: /* no board */
    case METHOD_LIST_BOARDS:     /* its page is filtered (admin.c) */
    case METHOD_UNKNOWN:
      break;
    }
  return NULL;
#undef ONE
}

const RankGrants *
handler_grants (const Call *call)
{
  return rank_config_grants (call->handler->config);
}

gboolean
handler_allows (const Call *call, RankRole role, const char *board)
{
  return call->peer == NULL
         || rank_grants_allow (handler_grants (call), call->peer->identity,
                               role, board);
}

/* s, at most max bytes of it (whole characters, if it is UTF-8), with
 * control characters escaped: for messages and the log. */
static char *
shown (const char *s, gsize max)
{
  GString *out = g_string_new (NULL);
  const char *end = s + MIN (strlen (s), max);

  for (const char *p = s; p < end; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      g_string_append_printf (out, "\\x%02x", (guchar) *p);
    else
      g_string_append_c (out, *p);
  if (*end != '\0')
    {
      /* Cut back to a character boundary, then say it is cut. */
      const char *valid_end;

      g_utf8_validate (out->str, (gssize) out->len, &valid_end);
      g_string_truncate (out, (gsize) (valid_end - out->str));
      g_string_append (out, "...");
    }
  return g_string_free (out, FALSE);
}

/* "anonymous callers" or "identity 'web'", for a refusal's message. */
static char *
who (const char *identity)
{
  g_autofree char *name = NULL;

  if (identity == NULL)
    return g_strdup ("anonymous callers");
  name = shown (identity, SHOWN_IDENTITY_BYTES);
  return g_strdup_printf ("identity '%s'", name);
}

/* The field of PermissionDenied for identity: NULL when anonymous. */
static void
set_denied (GObject *result, const Call *call, const char *board, RankRole role,
            const char *reason)
{
  const char *method = handler_methods[call->method].name;
  const char *identity = call->peer->identity;
  g_autofree char *shown_board
      = board != NULL ? shown (board, RANK_BOARD_MAX_BYTES) : NULL;
  g_autofree char *shown_identity
      = identity != NULL ? shown (identity, SHOWN_IDENTITY_BYTES) : NULL;
  g_autofree char *caller = who (identity);
  g_autofree char *where = board != NULL
                               ? g_strdup_printf (" on board '%s'", shown_board)
                               : g_strdup ("");
  const char *anywhere = board != NULL ? "" : " on at least one board";
  g_autofree char *message = NULL;
  rankPermissionDenied *x;

  if (!rank_grants_configured (handler_grants (call)))
    message = g_strdup_printf (
        "%s%s needs role %s%s; %s %s none: no grant is configured, and "
        "without grants nobody has admin; grant it on purpose ([grant NAME] "
        "admin=PATTERNS in the config file, or --grant NAME=admin; grants: "
        "docs/security.md)",
        method, where, rank_role_name (role), anywhere, caller,
        identity != NULL ? "has" : "have");
  else
    message = g_strdup_printf (
        "%s%s needs role %s%s; %s %s %s (grants: docs/security.md)", method,
        where, rank_role_name (role), anywhere, caller,
        identity != NULL ? "has" : "have",
        strcmp (reason, "no_role") == 0 ? "no such role on any board"
                                        : "none on it");
  x = g_object_new (RANK_TYPE_PERMISSION_DENIED, "message", message, "method",
                    method, "role", rank_role_name (role), NULL);
  if (shown_board != NULL)
    g_object_set (x, "board", shown_board, NULL);
  if (shown_identity != NULL)
    g_object_set (x, "identity", shown_identity, NULL);
  g_object_set (result, "denied", x, NULL);
  g_object_unref (x);
}

/* Answers call with PermissionDenied for role on board (NULL: none named). */
static void
refuse (Call *call, const char *board, RankRole role)
{
  GObject *result
      = g_object_new (handler_methods[call->method].result_type (), NULL);
  const char *reason
      = rank_grants_any (handler_grants (call), call->peer->identity, role)
            ? "board_not_granted"
            : "no_role";

  rank_metrics_refused (call->peer->identity,
                        handler_methods[call->method].name, reason);
  set_denied (result, call, board, role, reason);
  call->outcome = RANK_OUTCOME_DENIED;
  handler_reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

gboolean
handler_authorize (Call *call)
{
  RankRole role = handler_methods[call->method].role;
  const RankGrants *grants = handler_grants (call);
  const char *last = NULL;
  gboolean more = TRUE;

  if (call->peer == NULL || role == RANK_ROLE_NONE)
    return TRUE;
  /* Without grants reads and writes are everyone's: no board to walk. */
  if (!rank_grants_configured (grants) && role != RANK_ROLE_ADMIN)
    return TRUE;
  if (call->method == METHOD_LIST_BOARDS)
    {
      /* Its page lists only the boards the caller has admin on. */
      if (rank_grants_any (grants, call->peer->identity, role))
        return TRUE;
      refuse (call, NULL, role);
      return FALSE;
    }
  for (guint i = 0; more; i++)
    {
      const char *board = board_of (call, i, &more);

      if (!more)
        break;
      if (board == NULL)
        {
          /* Not given: the method refuses it, unless the caller has the
           * role on no board at all. */
          if (rank_grants_any (grants, call->peer->identity, role))
            continue;
          refuse (call, NULL, role);
          return FALSE;
        }
      if (last != NULL && strcmp (board, last) == 0)
        continue;
      if (!rank_grants_allow (grants, call->peer->identity, role, board))
        {
          refuse (call, board, role);
          return FALSE;
        }
      last = board;
    }
  return TRUE;
}

/* ---- the audit of DeleteBoard and ResetBoard ---- */

void
handler_audit (const Call *call)
{
  static const char *const outcomes[RANK_OUTCOMES]
      = { "done",
          "refused: InvalidArgument",
          "refused: NotFound",
          "failed: Unavailable (it may have run in part)",
          "failed: internal error",
          "refused: PermissionDenied" };
  const char *request_id = NULL, *board;
  g_autofree char *shown_board = NULL, *shown_rid = NULL, *caller = NULL;
  gboolean more;

  if (call->method != METHOD_DELETE_BOARD && call->method != METHOD_RESET_BOARD)
    return;
  board = board_of (call, 0, &more);
  if (call->method == METHOD_DELETE_BOARD)
    {
      const rankDeleteBoardRequest *r
          = ((const rankRankingDeleteBoardArgs *) call->args)->request;

      request_id = r != NULL ? r->request_id : NULL;
    }
  else
    {
      const rankResetBoardRequest *r
          = ((const rankRankingResetBoardArgs *) call->args)->request;

      request_id = r != NULL ? r->request_id : NULL;
    }
  shown_board = shown (board != NULL ? board : "", RANK_BOARD_MAX_BYTES);
  shown_rid
      = shown (request_id != NULL ? request_id : "", RANK_REQUEST_ID_MAX_BYTES);
  if (call->peer == NULL)
    caller = g_strdup ("rankd itself");
  else if (call->peer->identity == NULL)
    caller = g_strdup_printf ("anonymous%s", call->peer->tls ? " (TLS)" : "");
  else
    {
      g_autofree char *name
          = shown (call->peer->identity, SHOWN_IDENTITY_BYTES);

      caller
          = g_strdup_printf ("'%s'%s", name, call->peer->tls ? " (TLS)" : "");
    }
  g_message ("audit: %s board '%s' by %s, request id '%s': %s",
             handler_methods[call->method].name, shown_board, caller, shown_rid,
             outcomes[MIN (call->outcome, RANK_OUTCOMES - 1)]);
}
