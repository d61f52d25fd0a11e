/* call.c -- rankctl's connection to rankd, and a call's exceptions or
 * error as a message and an exit code. */
#include "rankctl.h"

/* ---- calls ---- */

int
call_outcome (Cli *cli, gboolean ok, Call *call)
{
  GObject *x = call->invalid       ? G_OBJECT (call->invalid)
               : call->not_found   ? G_OBJECT (call->not_found)
               : call->unavailable ? G_OBJECT (call->unavailable)
                                   : G_OBJECT (call->denied);
  int code = call->invalid       ? EXIT_INVALID
             : call->not_found   ? EXIT_NOT_FOUND
             : call->unavailable ? EXIT_UNAVAILABLE
                                 : EXIT_DENIED;

  if (ok)
    code = EXIT_OK;
  else if (x != NULL)
    {
      g_autofree char *message = NULL;

      g_object_get (x, "message", &message, NULL);
      fail (code, "%s", message);
    }
  else if (call->error != NULL
           && call->error->domain == THRIFT_APPLICATION_EXCEPTION_ERROR
           && call->error->code
                  == THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR
           && strstr (call->error->message, "rankd expects ") != NULL)
    /* rankd read first bytes unlike its framing and protocol, said which
     * it expects, and closed the connection (wire.c): out of reach as
     * configured, as when it closed without a word. */
    code = fail (EXIT_UNAVAILABLE,
                 "rankd: %s (do --transport and --protocol match rankd's?)",
                 call->error->message);
  else if (call->error == NULL || call->error->domain != THRIFT_TRANSPORT_ERROR)
    /* A TApplicationException, or an answer that does not decode. */
    code = fail (EXIT_OTHER, "rankd: %s",
                 call->error ? call->error->message : "no result");
  else
    {
      g_autofree char *where = rank_address_to_string (&cli->address);
      const char *message = call->error->message;

      /* rankd closes, unanswered, a connection whose first bytes are not
       * in its framing and protocol; a TLS port one that does not begin
       * with a TLS handshake. */
      gboolean dropped = strstr (message, "closed") != NULL
                         || strstr (message, "reset") != NULL;
      const char *hint
          = !dropped || strstr (message, "(the server") != NULL ? ""
            : cli->tls ? " (do --transport and --protocol match rankd's?)"
                       : " (do --transport and --protocol match rankd's? Is "
                         "it a TLS port: --tls?)";

      code = fail (EXIT_UNAVAILABLE, "no answer from rankd at %s: %s%s", where,
                   message, hint);
    }
  g_clear_object (&call->invalid);
  g_clear_object (&call->not_found);
  g_clear_object (&call->unavailable);
  g_clear_object (&call->denied);
  g_clear_error (&call->error);
  return code;
}

/* Connects to rankd (once); NULL, printed, if it is out of reach: the
 * command then exits with EXIT_UNAVAILABLE. */
rankRankingIf *
rankd (Cli *cli)
{
  g_autoptr (GError) error = NULL;

  if (cli->client == NULL)
    cli->client = rank_client_connect_tls (
        cli->address.host, cli->address.port, cli->framed, cli->protocol,
        cli->timeout_ms, cli->tls_context, cli->tls_server_name.value, &error);
  if (cli->client == NULL)
    {
      g_autofree char *where = rank_address_to_string (&cli->address);

      fail (EXIT_UNAVAILABLE, "cannot reach rankd at %s: %s", where,
            error->message);
      return NULL;
    }
  return rank_client_iface (cli->client);
}

const char *
arg (const Cli *cli, guint i)
{
  return i < cli->args->len ? cli->args->pdata[i] : NULL;
}

/* The request id to send: --request-id, or a new random one. */
char *
request_id (const Cli *cli)
{
  return cli->request_id != NULL ? g_strdup (cli->request_id)
                                 : g_uuid_string_random ();
}

/* After a failed update or remove with a made-up request id: the id a retry
 * must reuse, as the call may have been applied. */
void
retry_hint (const Cli *cli, int code, const char *rid)
{
  if (cli->request_id == NULL
      && (code == EXIT_UNAVAILABLE || code == EXIT_OTHER))
    fprintf (stderr,
             "rankctl: to retry, reuse --request-id %s (applied at most "
             "once)\n",
             rid);
}
