/* cmd_board.c -- the commands on the server and its boards: info,
 * whoami, boards, board-info, delete-board, reset-board. */
#include "rankctl.h"

/* ---- the server, import ---- */

int
cmd_info (Cli *cli)
{
  g_autoptr (rankGetServerInfoRequest) req
      = g_object_new (RANK_TYPE_GET_SERVER_INFO_REQUEST, NULL);
  g_autoptr (rankServerInfo) info = g_object_new (RANK_TYPE_SERVER_INFO, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_server_info (iface, &info, req, &call.unavailable,
                                        &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "version", json_quoted (info->version),
                  cell (info->version));
      record_add (&r, "idl_version", json_quoted (info->idl_version),
                  cell (info->idl_version));
      record_add (&r, "configured_boards", cell_i64 (info->configured_boards),
                  cell_i64 (info->configured_boards));
      record_add (&r, "uptime_seconds", cell_i64 (info->uptime_seconds),
                  cell_i64 (info->uptime_seconds));
      record_print_free (&r, cli->json);
    }
  return code;
}

/* The grants as a JSON array and as table text ("read:* write:*"). */
static void
grants_texts (const GPtrArray *grants, char **json, char **text)
{
  g_autoptr (GString) j = g_string_new ("[");
  g_autoptr (GString) t = g_string_new (NULL);

  for (guint i = 0; grants != NULL && i < grants->len; i++)
    {
      g_autofree char *quoted = json_quoted (grants->pdata[i]);

      g_string_append_printf (j, "%s%s", i ? "," : "", quoted);
      g_string_append_printf (t, "%s%s", i ? " " : "",
                              (const char *) grants->pdata[i]);
    }
  g_string_append_c (j, ']');
  *json = g_string_free (g_steal_pointer (&j), FALSE);
  *text = t->len > 0 ? g_string_free (g_steal_pointer (&t), FALSE)
                     : g_strdup ("(none)");
}

/* Who rankd takes this connection for, and what it may do: GetServerInfo's
 * identity, tls and grants (IDL 1.7). */
int
cmd_whoami (Cli *cli)
{
  g_autoptr (rankGetServerInfoRequest) req
      = g_object_new (RANK_TYPE_GET_SERVER_INFO_REQUEST, NULL);
  g_autoptr (rankServerInfo) info = g_object_new (RANK_TYPE_SERVER_INFO, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;
  Record r;
  char *json, *text;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_server_info (iface, &info, req, &call.unavailable,
                                        &call.error);
  code = call_outcome (cli, ok, &call);
  if (code != EXIT_OK)
    return code;
  if (!info->__isset_grants)
    return fail (EXIT_OTHER,
                 "rankd %s (IDL %s) does not say who calls: whoami needs "
                 "IDL 1.7 or later",
                 info->version, info->idl_version);
  r = record_new ();
  record_add (&r, "identity",
              info->__isset_identity ? json_quoted (info->identity)
                                     : g_strdup ("null"),
              cell (info->__isset_identity ? info->identity : "(anonymous)"));
  record_add (&r, "tls", g_strdup (info->tls ? "true" : "false"),
              g_strdup (info->tls ? "yes" : "no"));
  grants_texts (info->grants, &json, &text);
  record_add (&r, "grants", json, text);
  record_print_free (&r, cli->json);
  return EXIT_OK;
}

/* ---- boards ---- */

int
cmd_boards (Cli *cli)
{
  static const char *const header[] = { "BOARD", "CONFIGURED", "MEMBERS" };
  static const gboolean numeric[] = { FALSE, FALSE, TRUE };
  g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) json = g_string_new ("{\"boards\":[");
  g_autofree char *after = g_strdup ("");
  rankRankingIf *iface;
  guint n = 0;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  while (after != NULL)
    {
      g_autoptr (rankListBoardsRequest) req
          = g_object_new (RANK_TYPE_LIST_BOARDS_REQUEST, "after", after,
                          "limit", RANK_LIST_BOARDS_MAX, NULL);
      g_autoptr (rankListBoardsResponse) page
          = g_object_new (RANK_TYPE_LIST_BOARDS_RESPONSE, NULL);
      Call call = { 0 };
      gboolean ok = rank_ranking_if_list_boards (
          iface, &page, req, &call.invalid, &call.unavailable, &call.denied,
          &call.error);
      int code = call_outcome (cli, ok, &call);

      if (code != EXIT_OK)
        return code;
      for (guint i = 0; i < page->boards->len; i++, n++)
        {
          const rankBoardSummary *b = page->boards->pdata[i];

          g_ptr_array_add (cells, cell (b->board));
          g_ptr_array_add (cells, g_strdup (b->configured ? "yes" : "no"));
          g_ptr_array_add (cells, cell_i64 (b->members));
          g_string_append (json, n ? ",{\"board\":" : "{\"board\":");
          rank_json_string (json, b->board, RANK_JSON_PLAIN);
          g_string_append_printf (
              json, ",\"configured\":%s,\"members\":%" G_GINT64_FORMAT "}",
              b->configured ? "true" : "false", b->members);
        }
      g_free (after);
      after = page->__isset_next_after ? g_strdup (page->next_after) : NULL;
    }
  if (cli->json)
    printf ("%s]}\n", json->str);
  else
    print_table (header, numeric, 3, cells);
  return EXIT_OK;
}

/* A map's entries as "key=value" (table) and a JSON object, keys in
 * order. */
static void
record_add_map (Record *r, const char *name, GHashTable *map)
{
  g_autoptr (GString) json = g_string_new (NULL);

  rank_json_map (json, map, RANK_JSON_PLAIN);
  record_add (r, name, g_strdup (json->str), cell_data (map));
}

int
cmd_board_info (Cli *cli)
{
  g_autoptr (rankGetBoardInfoRequest) req = g_object_new (
      RANK_TYPE_GET_BOARD_INFO_REQUEST, "board", arg (cli, 0), NULL);
  g_autoptr (rankBoardInfo) info = g_object_new (RANK_TYPE_BOARD_INFO, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_board_info (iface, &info, req, &call.invalid,
                                       &call.unavailable, &call.denied,
                                       &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();
      g_autoptr (GString) periods = g_string_new ("[");
      g_autoptr (GString) periods_text = g_string_new (NULL);

      for (guint i = 0; i < info->periods->len; i++)
        {
          g_autofree char *p = cell (info->periods->pdata[i]);

          if (i > 0)
            g_string_append_c (periods, ',');
          rank_json_string (periods, info->periods->pdata[i], RANK_JSON_PLAIN);
          g_string_append_printf (periods_text, "%s%s", i ? " " : "", p);
        }
      g_string_append_c (periods, ']');
      record_add (&r, "board", json_quoted (info->board), cell (info->board));
      record_add (&r, "configured",
                  g_strdup (info->configured ? "true" : "false"),
                  g_strdup (info->configured ? "yes" : "no"));
      record_add_map (&r, "options", info->options);
      record_add (&r, "members", cell_i64 (info->members),
                  cell_i64 (info->members));
      record_add (&r, "periods", g_strdup (periods->str),
                  g_strdup (periods_text->str));
      record_add (&r, "keys", cell_i64 (info->keys), cell_i64 (info->keys));
      record_add (&r, "memory_bytes", cell_i64 (info->memory_bytes),
                  cell_i64 (info->memory_bytes));
      if (info->__isset_stored_layout)
        record_add (&r, "stored_layout", json_quoted (info->stored_layout),
                    cell (info->stored_layout));
      record_print_free (&r, cli->json);
    }
  return code;
}

/* DeleteBoard (reset: ResetBoard); only with --yes. */
static int
clear_board (Cli *cli, gboolean reset)
{
  const char *name = reset ? "reset-board" : "delete-board";
  g_autofree char *rid = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok, applied = FALSE;
  gint64 removed = 0;
  int code;

  if (!cli->yes)
    return fail (EXIT_INVALID,
                 "%s removes %s of board '%s' for good: add --yes to do it",
                 name, reset ? "every entry" : "every key", arg (cli, 0));
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  if (reset)
    {
      g_autoptr (rankResetBoardRequest) req
          = g_object_new (RANK_TYPE_RESET_BOARD_REQUEST, "board", arg (cli, 0),
                          "request_id", rid, NULL);
      g_autoptr (rankResetBoardResponse) resp
          = g_object_new (RANK_TYPE_RESET_BOARD_RESPONSE, NULL);

      ok = rank_ranking_if_reset_board (iface, &resp, req, &call.invalid,
                                        &call.unavailable, &call.denied,
                                        &call.error);
      applied = resp->applied, removed = resp->keys_removed;
    }
  else
    {
      g_autoptr (rankDeleteBoardRequest) req
          = g_object_new (RANK_TYPE_DELETE_BOARD_REQUEST, "board", arg (cli, 0),
                          "request_id", rid, NULL);
      g_autoptr (rankDeleteBoardResponse) resp
          = g_object_new (RANK_TYPE_DELETE_BOARD_RESPONSE, NULL);

      ok = rank_ranking_if_delete_board (iface, &resp, req, &call.invalid,
                                         &call.unavailable, &call.denied,
                                         &call.error);
      applied = resp->applied, removed = resp->keys_removed;
    }
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "applied", g_strdup (applied ? "true" : "false"),
                  g_strdup (applied ? "yes"
                                    : "no (a retry: done before, nothing "
                                      "changed)"));
      record_add (&r, "keys_removed", cell_i64 (removed), cell_i64 (removed));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  return code;
}

int
cmd_delete_board (Cli *cli)
{
  return clear_board (cli, FALSE);
}

int
cmd_reset_board (Cli *cli)
{
  return clear_board (cli, TRUE);
}
