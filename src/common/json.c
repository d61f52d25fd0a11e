/* json.c -- JSON text (see json.h). */
#include "json.h"

#include "memberdata.h"

void
rank_json_string (GString *out, const char *s, RankJsonStyle style)
{
  g_autofree char *valid = g_utf8_make_valid (s, -1);
  gboolean html = style == RANK_JSON_HTML_SAFE;

  g_string_append_c (out, '"');
  for (const char *p = valid; *p != '\0'; p++)
    {
      guchar c = (guchar) *p;

      if (c == '"' || c == '\\')
        g_string_append_printf (out, "\\%c", c);
      else if (!html && c == '\n')
        g_string_append (out, "\\n");
      else if (!html && c == '\t')
        g_string_append (out, "\\t");
      else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&')))
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_c (out, (char) c);
    }
  g_string_append_c (out, '"');
}

void
rank_json_map (GString *out, GHashTable *map, RankJsonStyle style)
{
  guint n = 0;
  g_autofree const char **keys
      = map != NULL ? rank_member_data_keys (map, &n) : NULL;

  g_string_append_c (out, '{');
  for (guint i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append_c (out, ',');
      rank_json_string (out, keys[i], style);
      g_string_append_c (out, ':');
      rank_json_string (out, g_hash_table_lookup (map, keys[i]), style);
    }
  g_string_append_c (out, '}');
}
