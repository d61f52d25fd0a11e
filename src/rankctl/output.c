/* output.c -- rankctl's answers as aligned tables or JSON (see rankctl.h). */
#include "rankctl.h"

/* ---- output ---- */

void
json_subscores (GString *out, const GArray *subscores)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < subscores->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                            g_array_index (subscores, gint64, i));
  g_string_append_c (out, ']');
}

/* A table cell: control characters shown as \xNN, so that a member named
 * "a\nb" cannot break a row. */
char *
cell (const char *s)
{
  g_autofree char *valid = g_utf8_make_valid (s, -1);
  GString *out = g_string_new (NULL);

  for (const char *p = valid; *p != '\0'; p++)
    if ((guchar) *p < 0x20 || *p == 0x7f)
      g_string_append_printf (out, "\\x%02x", (guchar) *p);
    else
      g_string_append_c (out, *p);
  return g_string_free (out, FALSE);
}

char *
cell_i64 (gint64 v)
{
  return g_strdup_printf ("%" G_GINT64_FORMAT, v);
}

char *
cell_subscores (const GArray *subscores)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < subscores->len; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                            g_array_index (subscores, gint64, i));
  return g_string_free (out, FALSE);
}

/* "key=value key=value", keys in order. */
char *
cell_data (GHashTable *data)
{
  GString *out = g_string_new (NULL);
  guint n;
  g_autofree const char **keys = rank_member_data_keys (data, &n);

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *k = cell (keys[i]);
      g_autofree char *v = cell (g_hash_table_lookup (data, keys[i]));

      g_string_append_printf (out, "%s%s=%s", i ? " " : "", k, v);
    }
  return g_string_free (out, FALSE);
}

/* Terminal columns a (valid UTF-8) string takes: wide characters two, combining
 * marks none. */
static glong
display_width (const char *s)
{
  glong width = 0;

  for (const char *p = s; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      width += g_unichar_iszerowidth (c) ? 0 : g_unichar_iswide (c) ? 2 : 1;
    }
  return width;
}

static void
pad (GString *line, glong n)
{
  for (glong i = 0; i < n; i++)
    g_string_append_c (line, ' ');
}

/* Prints cells (row after row, cols each, owned) under header (or none),
 * each column as wide as its widest cell, two spaces apart; the columns
 * numeric[] says are numbers are right-aligned. */
void
print_table (const char *const *header, const gboolean *numeric, guint cols,
             GPtrArray *cells)
{
  g_autofree glong *width = g_new0 (glong, cols);
  guint first = header != NULL ? 0 : 1;
  guint rows = cells->len / cols + 1; /* with the header */

  for (guint c = 0; header != NULL && c < cols; c++)
    width[c] = display_width (header[c]);
  for (guint i = 0; i < cells->len; i++)
    width[i % cols] = MAX (width[i % cols], display_width (cells->pdata[i]));
  for (guint r = first; r < rows; r++)
    {
      g_autoptr (GString) line = g_string_new (NULL);

      for (guint c = 0; c < cols; c++)
        {
          const char *text
              = r == 0 ? header[c] : cells->pdata[(r - 1) * cols + c];
          glong gap = width[c] - display_width (text);

          if (c > 0)
            g_string_append (line, "  ");
          if (numeric[c])
            pad (line, gap);
          g_string_append (line, text);
          if (!numeric[c] && c + 1 < cols)
            pad (line, gap);
        }
      while (line->len > 0 && line->str[line->len - 1] == ' ')
        g_string_truncate (line, line->len - 1);
      puts (line->str);
    }
}

/* An entry as a JSON object with the IDL's field names. */
void
json_entry (GString *out, rankEntry *e)
{
  g_string_append_printf (out, "{\"rank\":%" G_GINT64_FORMAT, e->rank);
  g_string_append (out, ",\"member\":");
  rank_json_string (out, e->member, RANK_JSON_PLAIN);
  g_string_append_printf (out, ",\"score\":%" G_GINT64_FORMAT, e->score);
  if (e->__isset_subscores)
    {
      g_string_append (out, ",\"subscores\":");
      json_subscores (out, e->subscores);
    }
  if (e->__isset_data)
    {
      g_string_append (out, ",\"data\":");
      rank_json_map (out, e->data, RANK_JSON_PLAIN);
    }
  g_string_append_c (out, '}');
}

/* Entries: RANK MEMBER SCORE, then SUBSCORES and DATA when any has them;
 * or a JSON list of objects. */
void
print_entries (GPtrArray *entries, gboolean json)
{
  static const char *const header[]
      = { "RANK", "MEMBER", "SCORE", "SUBSCORES", "DATA" };
  static const char *const header_no_subscores[]
      = { "RANK", "MEMBER", "SCORE", "DATA" };
  static const gboolean numeric[] = { TRUE, FALSE, TRUE, FALSE, FALSE };
  g_autoptr (GPtrArray) cells = g_ptr_array_new_with_free_func (g_free);
  gboolean subs = FALSE, data = FALSE;

  for (guint i = 0; i < entries->len; i++)
    {
      rankEntry *e = entries->pdata[i];

      subs = subs || e->__isset_subscores;
      data = data || e->__isset_data;
    }
  if (json)
    {
      g_autoptr (GString) out = g_string_new ("[");

      for (guint i = 0; i < entries->len; i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          json_entry (out, entries->pdata[i]);
        }
      g_string_append_c (out, ']');
      puts (out->str);
      return;
    }
  for (guint i = 0; i < entries->len; i++)
    {
      rankEntry *e = entries->pdata[i];

      g_ptr_array_add (cells, cell_i64 (e->rank));
      g_ptr_array_add (cells, cell (e->member));
      g_ptr_array_add (cells, cell_i64 (e->score));
      if (subs)
        g_ptr_array_add (cells, e->__isset_subscores
                                    ? cell_subscores (e->subscores)
                                    : g_strdup (""));
      if (data)
        g_ptr_array_add (cells,
                         e->__isset_data ? cell_data (e->data) : g_strdup (""));
    }
  print_table (subs ? header : header_no_subscores, numeric,
               3 + (subs ? 1 : 0) + (data ? 1 : 0), cells);
}

Record
record_new (void)
{
  return (Record){ g_ptr_array_new (), g_ptr_array_new_with_free_func (g_free),
                   g_ptr_array_new_with_free_func (g_free) };
}

/* Adds a field; takes json and text. */
void
record_add (Record *r, const char *name, char *json, char *text)
{
  g_ptr_array_add (r->names, (char *) name);
  g_ptr_array_add (r->json, json);
  g_ptr_array_add (r->cells, g_strdup (name));
  g_ptr_array_add (r->cells, text);
}

char *
json_quoted (const char *s)
{
  GString *out = g_string_new (NULL);

  rank_json_string (out, s, RANK_JSON_PLAIN);
  return g_string_free (out, FALSE);
}

void
record_print_free (Record *r, gboolean json)
{
  static const gboolean numeric[] = { FALSE, FALSE };

  if (json)
    {
      g_autoptr (GString) out = g_string_new ("{");

      for (guint i = 0; i < r->names->len; i++)
        {
          if (i > 0)
            g_string_append_c (out, ',');
          rank_json_string (out, r->names->pdata[i], RANK_JSON_PLAIN);
          g_string_append_printf (out, ":%s", (char *) r->json->pdata[i]);
        }
      g_string_append_c (out, '}');
      puts (out->str);
    }
  else
    print_table (NULL, numeric, 2, r->cells);
  g_ptr_array_unref (r->names);
  g_ptr_array_unref (r->json);
  g_ptr_array_unref (r->cells);
}

/* One number: as it is, or {"name":number}. */
void
print_number (const char *name, const char *number, gboolean json)
{
  if (json)
    printf ("{\"%s\":%s}\n", name, number);
  else
    puts (number);
}
