/* client.c -- Ranking client construction (see client.h). */
#include "client.h"

#include "thrift_fixes.h"

struct _RankClient
{
  RankClientTransport *transport;
  ThriftProtocol *protocol;
  rankRankingClient *client;
};

RankClient *
rank_client_connect (const char *host, guint16 port, gboolean framed,
                     RankProtocolKind protocol, int timeout_ms, GError **error)
{
  RankClient *client;
  RankClientTransport *transport;

  rank_thrift_fixes_apply ();
  transport
      = rank_client_transport_connect (host, port, framed, timeout_ms, error);
  if (transport == NULL)
    return NULL;
  client = g_new0 (RankClient, 1);
  client->transport = transport;
  client->protocol = rank_protocol_new (protocol, THRIFT_TRANSPORT (transport));
  client->client = g_object_new (RANK_TYPE_RANKING_CLIENT, "input_protocol",
                                 client->protocol, "output_protocol",
                                 client->protocol, NULL);
  return client;
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
  g_free (client);
}
