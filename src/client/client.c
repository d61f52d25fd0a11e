/* client.c -- Ranking client construction (see client.h). */
#include "client.h"

#include "thrift_fixes.h"

struct _RankClient
{
  /* What it was connected with, for rank_client_connect_again. */
  char *host;
  guint16 port;
  gboolean framed;
  RankProtocolKind protocol_kind;
  int timeout_ms;
  RankTlsContext *tls; /* NULL: plain TCP */
  char *server_name;
  RankClientTransport *transport;
  ThriftProtocol *protocol;
  rankRankingClient *client;
};

RankClient *
rank_client_connect (const char *host, guint16 port, gboolean framed,
                     RankProtocolKind protocol, int timeout_ms, GError **error)
{
  return rank_client_connect_tls (host, port, framed, protocol, timeout_ms,
                                  NULL, NULL, error);
}

RankClient *
rank_client_connect_tls (const char *host, guint16 port, gboolean framed,
                         RankProtocolKind protocol, int timeout_ms,
                         RankTlsContext *tls, const char *server_name,
                         GError **error)
{
  RankClient *client;
  RankClientTransport *transport;

  rank_thrift_fixes_apply ();
  transport = rank_client_transport_connect_tls (host, port, framed, timeout_ms,
                                                 tls, server_name, error);
  if (transport == NULL)
    return NULL;
  client = g_new0 (RankClient, 1);
  client->host = g_strdup (host);
  client->port = port;
  client->framed = framed;
  client->protocol_kind = protocol;
  client->timeout_ms = timeout_ms;
  client->tls = tls != NULL ? rank_tls_context_ref (tls) : NULL;
  client->server_name = g_strdup (server_name);
  client->transport = transport;
  client->protocol = rank_protocol_new (protocol, THRIFT_TRANSPORT (transport));
  client->client = g_object_new (RANK_TYPE_RANKING_CLIENT, "input_protocol",
                                 client->protocol, "output_protocol",
                                 client->protocol, NULL);
  return client;
}

RankClient *
rank_client_connect_again (const RankClient *client, GError **error)
{
  return rank_client_connect_tls (client->host, client->port, client->framed,
                                  client->protocol_kind, client->timeout_ms,
                                  client->tls, client->server_name, error);
}

rankRankingIf *
rank_client_iface (RankClient *client)
{
  return RANK_RANKING_IF (client->client);
}

RankClientTransport *
rank_client_get_transport (RankClient *client)
{
  return client->transport;
}

void
rank_client_free (RankClient *client)
{
  if (client == NULL)
    return;
  g_object_unref (client->client);
  g_object_unref (client->protocol);
  g_object_unref (client->transport);
  rank_tls_context_unref (client->tls);
  g_free (client->server_name);
  g_free (client->host);
  g_free (client);
}
