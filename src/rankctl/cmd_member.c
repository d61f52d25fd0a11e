/* cmd_member.c -- the commands on members and scores: update, enqueue,
 * the reads, remove, member data. */
#include "rankctl.h"

/* ---- commands ---- */

/* The UpdateRequest the command line describes (update, enqueue). */
/* --window: a read of the board's rolling window (IDL 1.8). Left unset
 * otherwise, so the request is what a 1.7 rankctl sent. */
static void
request_window (Cli *cli, gpointer req)
{
  if (cli->window)
    g_object_set (req, "window", TRUE, NULL);
}

static rankUpdateRequest *
update_request (Cli *cli, gint64 value, const char *rid)
{
  /* Fields, not properties, so that nothing is checked twice: rankd's
   * InvalidArgument names the field. */
  rankUpdateRequest *req = g_object_new (RANK_TYPE_UPDATE_REQUEST, NULL);

  req->board = g_strdup (arg (cli, 0));
  req->member = g_strdup (arg (cli, 1));
  req->value = value;
  req->request_id = g_strdup (rid);
  req->mode = cli->mode;
  req->__isset_mode = cli->has_mode;
  req->timestamp_ms = cli->timestamp_ms;
  req->__isset_timestamp_ms = cli->has_timestamp;
  /* Only update takes --without-rank. */
  if (cli->without_rank)
    {
      req->with_rank = FALSE;
      req->__isset_with_rank = TRUE;
    }
  if (cli->subscores->len > 0)
    {
      g_array_append_vals (req->subscores, cli->subscores->data,
                           cli->subscores->len);
      req->__isset_subscores = TRUE;
    }
  if (cli->has_data)
    {
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, cli->data);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (req->data, g_strdup (k), g_strdup (v));
      req->__isset_data = TRUE;
    }
  return req;
}

int
cmd_update (Cli *cli)
{
  g_autofree char *rid = NULL;
  rankUpdateRequest *req;
  rankUpdateResponse *resp;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 value;
  gboolean ok;
  int code;

  if (!parse_i64 ("VALUE", arg (cli, 2), &value))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  req = update_request (cli, value, rid);
  resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  ok = rank_ranking_if_update (iface, &resp, req, &call.invalid,
                               &call.unavailable, &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "score", cell_i64 (resp->score), cell_i64 (resp->score));
      if (resp->__isset_rank)
        record_add (&r, "rank", cell_i64 (resp->rank), cell_i64 (resp->rank));
      if (resp->__isset_subscores)
        {
          g_autoptr (GString) subs = g_string_new (NULL);

          json_subscores (subs, resp->subscores);
          record_add (&r, "subscores", g_strdup (subs->str),
                      cell_subscores (resp->subscores));
        }
      record_add (
          &r, "applied", g_strdup (resp->applied ? "true" : "false"),
          g_strdup (resp->applied ? "yes" : "no (a retry: nothing changed)"));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  g_object_unref (req);
  g_object_unref (resp);
  return code;
}

/* Enqueue of one update: its queue entry's id, or its refusal. */
int
cmd_enqueue (Cli *cli)
{
  g_autofree char *rid = NULL;
  g_autoptr (rankEnqueueRequest) req = NULL;
  g_autoptr (rankEnqueueResponse) resp = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 value;
  gboolean ok;
  int code;

  if (!parse_i64 ("VALUE", arg (cli, 2), &value))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  req = g_object_new (RANK_TYPE_ENQUEUE_REQUEST, NULL);
  g_ptr_array_add (req->requests, update_request (cli, value, rid));
  resp = g_object_new (RANK_TYPE_ENQUEUE_RESPONSE, NULL);
  ok = rank_ranking_if_enqueue (iface, &resp, req, &call.invalid,
                                &call.unavailable, &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      rankEnqueueResult *one = resp->results->pdata[0];

      if (one->__isset_invalid)
        {
          const char *m = one->invalid->message;
          const char *own = g_str_has_prefix (m, "requests[0]: ")
                                ? m + strlen ("requests[0]: ")
                                : m;

          code = fail (EXIT_INVALID, "%s", own);
        }
      else
        {
          Record r = record_new ();

          record_add (&r, "queued", json_quoted (one->id), cell (one->id));
          record_add (&r, "request_id", json_quoted (rid), cell (rid));
          record_print_free (&r, cli->json);
        }
    }
  retry_hint (cli, code, rid);
  return code;
}

int
cmd_queue_status (Cli *cli)
{
  g_autoptr (rankGetQueueStatusRequest) req = g_object_new (
      RANK_TYPE_GET_QUEUE_STATUS_REQUEST, "board", arg (cli, 0), NULL);
  g_autoptr (rankQueueStatus) st = g_object_new (RANK_TYPE_QUEUE_STATUS, NULL);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  ok = rank_ranking_if_get_queue_status (iface, &st, req, &call.invalid,
                                         &call.unavailable, &call.denied,
                                         &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      record_add (&r, "queued", g_strdup (st->queued ? "true" : "false"),
                  g_strdup (st->queued ? "yes" : "no (queue=off)"));
      record_add (&r, "backlog", cell_i64 (st->backlog),
                  cell_i64 (st->backlog));
      record_add (&r, "pending", cell_i64 (st->pending),
                  cell_i64 (st->pending));
      record_add (&r, "oldest_age_ms", cell_i64 (st->oldest_age_ms),
                  cell_i64 (st->oldest_age_ms));
      record_add (&r, "applied", cell_i64 (st->applied),
                  cell_i64 (st->applied));
      record_add (&r, "dead_lettered", cell_i64 (st->dead_lettered),
                  cell_i64 (st->dead_lettered));
      record_print_free (&r, cli->json);
    }
  return code;
}

int
cmd_rank (Cli *cli)
{
  g_autoptr (rankGetRankRequest) req = NULL;
  rankEntry *entry;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  req = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  request_window (cli, req);
  ok = rank_ranking_if_get_rank (iface, &entry, req, &call.invalid,
                                 &call.not_found, &call.unavailable,
                                 &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new (NULL);

      json_entry (out, entry); /* the object, not a list of one */
      puts (out->str);
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) one = g_ptr_array_new ();

      g_ptr_array_add (one, entry);
      print_entries (one, FALSE);
    }
  g_object_unref (entry);
  return code;
}

/* Prints a page (top, around, sample) once the call is made. */
static int
page_outcome (Cli *cli, gboolean ok, Call *call, GPtrArray *page)
{
  int code = call_outcome (cli, ok, call);

  if (code == EXIT_OK)
    print_entries (page, cli->json);
  g_ptr_array_unref (page);
  return code;
}

int
cmd_top (Cli *cli)
{
  g_autoptr (rankGetTopNRequest) req = NULL;
  gint32 n = DEFAULT_TOP_N;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (arg (cli, 1) != NULL && !parse_i32 ("N", arg (cli, 1), &n))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", arg (cli, 0), "n",
                      n, "offset", cli->offset, "periods_back",
                      cli->periods_back, "with_data", cli->with_data, NULL);
  request_window (cli, req);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_top_n (iface, &page, req, &call.invalid,
                                  &call.unavailable, &call.denied, &call.error);
  return page_outcome (cli, ok, &call, page);
}

int
cmd_around (Cli *cli)
{
  g_autoptr (rankGetAroundRequest) req = NULL;
  gint32 radius = DEFAULT_RADIUS;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (arg (cli, 2) != NULL && !parse_i32 ("RADIUS", arg (cli, 2), &radius))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "radius", radius, "periods_back",
                      cli->periods_back, "with_data", cli->with_data, NULL);
  request_window (cli, req);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_around (iface, &page, req, &call.invalid,
                                   &call.not_found, &call.unavailable,
                                   &call.denied, &call.error);
  return page_outcome (cli, ok, &call, page);
}

int
cmd_sample (Cli *cli)
{
  g_autoptr (rankSampleRequest) req = NULL;
  gint32 count = DEFAULT_SAMPLE_COUNT;
  gint64 min, max;
  rankRankingIf *iface;
  GPtrArray *page;
  Call call = { 0 };
  gboolean ok;

  if (!parse_i64 ("MIN", arg (cli, 1), &min)
      || !parse_i64 ("MAX", arg (cli, 2), &max)
      || (arg (cli, 3) != NULL && !parse_i32 ("COUNT", arg (cli, 3), &count)))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_SAMPLE_REQUEST, "board", arg (cli, 0),
                      "min_score", min, "max_score", max, "count", count,
                      "periods_back", cli->periods_back, NULL);
  request_window (cli, req);
  page = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_sample (iface, &page, req, &call.invalid,
                               &call.unavailable, &call.denied, &call.error);
  return page_outcome (cli, ok, &call, page);
}

int
cmd_ranks (Cli *cli)
{
  static const char *const header[] = { "RANK", "MEMBER", "SCORE" };
  static const gboolean numeric[] = { TRUE, FALSE, TRUE };
  g_autoptr (rankGetRanksRequest) req
      = g_object_new (RANK_TYPE_GET_RANKS_REQUEST, NULL);
  g_autoptr (GPtrArray) result = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req->board = g_strdup (arg (cli, 0));
  for (guint i = 1; i < cli->args->len; i++)
    g_ptr_array_add (req->members, g_strdup (cli->args->pdata[i]));
  req->periods_back = cli->periods_back;
  req->__isset_periods_back = TRUE;
  request_window (cli, req);
  result = g_ptr_array_new_with_free_func (g_object_unref);
  ok = rank_ranking_if_get_ranks (iface, &result, req, &call.invalid,
                                  &call.unavailable, &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new ("[");

      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];

          g_string_append (out, i ? ",{\"member\":" : "{\"member\":");
          rank_json_string (out, r->member, RANK_JSON_PLAIN);
          if (r->found)
            g_string_append_printf (out,
                                    ",\"found\":true,\"rank\":%" G_GINT64_FORMAT
                                    ",\"score\":%" G_GINT64_FORMAT "}",
                                    r->rank, r->score);
          else
            g_string_append (out, ",\"found\":false}");
        }
      g_string_append_c (out, ']');
      puts (out->str);
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);

      /* Members not on the board: "-" for rank and score. */
      for (guint i = 0; i < result->len; i++)
        {
          rankRankOf *r = result->pdata[i];

          g_ptr_array_add (cells,
                           r->found ? cell_i64 (r->rank) : g_strdup ("-"));
          g_ptr_array_add (cells, cell (r->member));
          g_ptr_array_add (cells,
                           r->found ? cell_i64 (r->score) : g_strdup ("-"));
        }
      print_table (header, numeric, 3, cells);
    }
  return code;
}

int
cmd_remove (Cli *cli)
{
  g_autofree char *rid = NULL;
  g_autoptr (rankRemoveRequest) req = NULL;
  rankRemoveResponse *resp;
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  rid = request_id (cli);
  resp = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
  req = g_object_new (RANK_TYPE_REMOVE_REQUEST, "board", arg (cli, 0), "member",
                      arg (cli, 1), "request_id", rid, NULL);
  ok = rank_ranking_if_remove (iface, &resp, req, &call.invalid,
                               &call.unavailable, &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      Record r = record_new ();

      /* removed means something only when applied. */
      record_add (&r, "removed", g_strdup (resp->removed ? "true" : "false"),
                  g_strdup (!resp->applied  ? "-"
                            : resp->removed ? "yes"
                                            : "no (it was not on the board)"));
      record_add (
          &r, "applied", g_strdup (resp->applied ? "true" : "false"),
          g_strdup (resp->applied ? "yes" : "no (a retry: nothing changed)"));
      record_add (&r, "request_id", json_quoted (rid), cell (rid));
      record_print_free (&r, cli->json);
    }
  retry_hint (cli, code, rid);
  g_object_unref (resp);
  return code;
}

static int
count_outcome (Cli *cli, gboolean ok, Call *call, const char *name,
               gint64 count)
{
  int code = call_outcome (cli, ok, call);
  g_autofree char *text = cell_i64 (count);

  if (code == EXIT_OK)
    print_number (name, text, cli->json);
  return code;
}

int
cmd_count (Cli *cli)
{
  g_autoptr (rankCountRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 count = 0;
  gboolean ok;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_COUNT_REQUEST, "board", arg (cli, 0),
                      "periods_back", cli->periods_back, NULL);
  request_window (cli, req);
  ok = rank_ranking_if_count (iface, &count, req, &call.invalid,
                              &call.unavailable, &call.denied, &call.error);
  return count_outcome (cli, ok, &call, "count", count);
}

int
cmd_count_between (Cli *cli)
{
  g_autoptr (rankCountBetweenRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 count = 0, min, max;
  gboolean ok;

  if (!parse_i64 ("MIN", arg (cli, 1), &min)
      || !parse_i64 ("MAX", arg (cli, 2), &max))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_COUNT_BETWEEN_REQUEST, "board", arg (cli, 0),
                      "min_score", min, "max_score", max, "periods_back",
                      cli->periods_back, NULL);
  request_window (cli, req);
  ok = rank_ranking_if_count_between (iface, &count, req, &call.invalid,
                                      &call.unavailable, &call.denied,
                                      &call.error);
  return count_outcome (cli, ok, &call, "count", count);
}

int
cmd_score_at_percentile (Cli *cli)
{
  g_autoptr (rankGetScoreAtPercentileRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  gint64 score = 0;
  double pct;
  gboolean ok;

  if (!parse_double ("PCT", arg (cli, 1), &pct))
    return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_SCORE_AT_PERCENTILE_REQUEST, "board",
                      arg (cli, 0), "pct", pct, "periods_back",
                      cli->periods_back, NULL);
  request_window (cli, req);
  ok = rank_ranking_if_get_score_at_percentile (
      iface, &score, req, &call.invalid, &call.not_found, &call.unavailable,
      &call.denied, &call.error);
  return count_outcome (cli, ok, &call, "score", score);
}

int
cmd_percentile (Cli *cli)
{
  char text[G_ASCII_DTOSTR_BUF_SIZE];
  g_autoptr (rankGetPercentileRequest) req = NULL;
  rankRankingIf *iface;
  Call call = { 0 };
  double pct = 0;
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  request_window (cli, req);
  ok = rank_ranking_if_get_percentile (iface, &pct, req, &call.invalid,
                                       &call.not_found, &call.unavailable,
                                       &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK)
    {
      /* The shortest text that reads back as the same double. */
      g_ascii_dtostr (text, sizeof text, pct);
      print_number ("percentile", isfinite (pct) ? text : "null", cli->json);
    }
  return code;
}

int
cmd_set_data (Cli *cli)
{
  g_autoptr (GHashTable) map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  for (guint i = 2; i < cli->args->len; i++)
    if (!parse_pair ("KEY=VALUE", cli->args->pdata[i], map))
      return EXIT_INVALID;
  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  {
    g_autoptr (rankSetMemberDataRequest) req
        = g_object_new (RANK_TYPE_SET_MEMBER_DATA_REQUEST, "board",
                        arg (cli, 0), "member", arg (cli, 1), NULL);
    GHashTableIter it;
    gpointer k, v;

    g_hash_table_iter_init (&it, map);
    while (g_hash_table_iter_next (&it, &k, &v))
      g_hash_table_insert (req->data, g_strdup (k), g_strdup (v));
    ok = rank_ranking_if_set_member_data (iface, req, &call.invalid,
                                          &call.not_found, &call.unavailable,
                                          &call.denied, &call.error);
  }
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new ("{\"data\":");

      rank_json_map (out, map, RANK_JSON_PLAIN);
      g_string_append_c (out, '}');
      puts (out->str);
    }
  else if (code == EXIT_OK && g_hash_table_size (map) == 0)
    puts ("data deleted");
  else if (code == EXIT_OK)
    printf ("data replaced: %u key%s\n", g_hash_table_size (map),
            g_hash_table_size (map) == 1 ? "" : "s");
  return code;
}

int
cmd_get_data (Cli *cli)
{
  static const char *const header[] = { "KEY", "VALUE" };
  static const gboolean numeric[] = { FALSE, FALSE };
  g_autoptr (rankGetMemberDataRequest) req = NULL;
  g_autoptr (GHashTable) map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  rankRankingIf *iface;
  Call call = { 0 };
  gboolean ok;
  int code;

  if ((iface = rankd (cli)) == NULL)
    return EXIT_UNAVAILABLE;
  req = g_object_new (RANK_TYPE_GET_MEMBER_DATA_REQUEST, "board", arg (cli, 0),
                      "member", arg (cli, 1), "periods_back", cli->periods_back,
                      NULL);
  ok = rank_ranking_if_get_member_data (iface, &map, req, &call.invalid,
                                        &call.not_found, &call.unavailable,
                                        &call.denied, &call.error);
  code = call_outcome (cli, ok, &call);
  if (code == EXIT_OK && cli->json)
    {
      g_autoptr (GString) out = g_string_new (NULL);

      rank_json_map (out, map, RANK_JSON_PLAIN);
      puts (out->str);
    }
  else if (code == EXIT_OK)
    {
      g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
      guint n;
      g_autofree const char **keys = rank_member_data_keys (map, &n);

      for (guint i = 0; i < n; i++)
        {
          g_ptr_array_add (cells, cell (keys[i]));
          g_ptr_array_add (cells, cell (g_hash_table_lookup (map, keys[i])));
        }
      print_table (header, numeric, 2, cells);
    }
  return code;
}
