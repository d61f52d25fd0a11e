/* server_info.c -- GetServerInfo: what this rankd is, and for how long it
 * has run. */
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

static void
set_server_info (GObject *object, gpointer data)
{
  rankRankingGetServerInfoResult *result
      = RANK_RANKING_GET_SERVER_INFO_RESULT (object);
  RankHandler *handler = data;
  rankServerInfo *info = result->success;
  g_auto (GStrv) boards = rank_config_board_names (handler->config);

  g_free (info->version);
  info->version = g_strdup (RANKD_VERSION);
  g_free (info->idl_version);
  info->idl_version = g_strdup (RANK_API_IDL_VERSION);
  info->configured_boards = g_strv_length (boards);
  info->uptime_seconds
      = (g_get_monotonic_time () - started_us) / G_USEC_PER_SEC;
  result->__isset_success = TRUE;
}

void
handler_start_get_server_info (Call *call)
{
  handler_reply_result (call, set_server_info, call->handler);
}
