/* server_info.c -- GetServerInfo: what this rankd is, for how long it has
 * run, and who it takes the caller for: its identity and its grants. */
#include "api.h"
#include "handler_private.h"

/* When the process started (monotonic), for uptime_seconds. */
static gint64 started_us;

void
handler_server_info_init (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      started_us = g_get_monotonic_time ();
      g_once_init_leave (&once, 1);
    }
}

/* The caller's identity, TLS or not, and grants (rankd's own calls have
 * every role). */
static void
set_caller (rankServerInfo *info, const Call *call)
{
  g_auto (GStrv) grants = NULL;

  if (call->peer == NULL)
    {
      static const char *const all[] = { "admin:*", "read:*", "write:*", NULL };

      grants = g_strdupv ((char **) all);
    }
  else
    grants = rank_grants_describe (handler_grants (call), call->peer->identity);
  if (call->peer != NULL && call->peer->identity != NULL)
    {
      info->identity = g_strdup (call->peer->identity);
      info->__isset_identity = TRUE;
    }
  info->tls = call->peer != NULL && call->peer->tls;
  info->__isset_tls = TRUE;
  for (char **g = grants; *g != NULL; g++)
    g_ptr_array_add (info->grants, g_strdup (*g));
  info->__isset_grants = TRUE;
}

static void
set_server_info (GObject *object, gpointer data)
{
  rankRankingGetServerInfoResult *result
      = RANK_RANKING_GET_SERVER_INFO_RESULT (object);
  const Call *call = data;
  RankHandler *handler = call->handler;
  rankServerInfo *info = result->success;
  g_auto (GStrv) boards = rank_config_board_names (handler->config);

  g_free (info->version);
  info->version = g_strdup (RANKD_VERSION);
  g_free (info->idl_version);
  info->idl_version = g_strdup (RANK_API_IDL_VERSION);
  info->configured_boards = g_strv_length (boards);
  info->uptime_seconds
      = (g_get_monotonic_time () - started_us) / G_USEC_PER_SEC;
  set_caller (info, call);
  result->__isset_success = TRUE;
}

void
handler_start_get_server_info (Call *call)
{
  handler_reply_result (call, set_server_info, call);
}
