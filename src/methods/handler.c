/* handler.c -- the handler of the Ranking methods (see handler.h): what
 * its calls share, a worker's, for their time, configuration, cache and
 * reply encoding. The calls themselves: handler_private.h names the files.
 */
#include "handler.h"
#include "handler_private.h"

static gint64
real_clock (gpointer data)
{
  return g_get_real_time () / 1000;
}

RankHandler *
rank_handler_new (RankStore *store, RankConfig *config,
                  gint64 default_window_ms, RankProtocolKind protocol,
                  gboolean framed, RankAnsweredFunc answered)
{
  RankHandler *handler = g_new0 (RankHandler, 1);

  handler_server_info_init ();
  handler->store = store;
  handler->config = rank_config_ref (config);
  handler->default_window_ms = default_window_ms;
  handler->clock = real_clock;
  handler->answered = answered;
  handler->writer = rank_reply_writer_new (framed);
  handler->out
      = rank_protocol_new (protocol, THRIFT_TRANSPORT (handler->writer));
  handler->metrics
      = rank_metrics_calls_new (handler_method_names (), METHOD_UNKNOWN);
  handler->inflight = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                             handler_flight_free);
  return handler;
}

void
rank_handler_set_cache (RankHandler *handler, RankReadCache *cache)
{
  handler->cache = cache;
}

void
rank_handler_set_clock (RankHandler *handler, RankClockFunc clock,
                        gpointer data)
{
  handler->clock = clock != NULL ? clock : real_clock;
  handler->clock_data = data;
}

void
rank_handler_set_config (RankHandler *handler, RankConfig *config)
{
  RankConfig *old = handler->config;

  handler->config = rank_config_ref (config);
  rank_config_unref (old);
  rank_store_forget_layouts (handler->store);
}

gint64
rank_handler_now (RankHandler *handler)
{
  return handler->clock (handler->clock_data);
}

gint64
rank_handler_default_window_ms (RankHandler *handler)
{
  return handler->default_window_ms;
}

RankConfig *
rank_handler_config (RankHandler *handler)
{
  return handler->config;
}

void
rank_handler_free (RankHandler *handler)
{
  if (handler == NULL)
    return;
  rank_metrics_calls_free (handler->metrics);
  g_hash_table_unref (handler->inflight);
  g_object_unref (handler->out);
  g_object_unref (handler->writer);
  rank_config_unref (handler->config);
  g_free (handler);
}
