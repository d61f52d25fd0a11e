/* memberdata.c -- encoding of member data (see memberdata.h). */
#include "memberdata.h"

#include <string.h>

#include "error.h"

static gint
by_key (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

const char **
rank_member_data_keys (GHashTable *map, guint *n)
{
  const char **keys = (const char **) g_hash_table_get_keys_as_array (map, n);

  qsort (keys, *n, sizeof *keys, by_key);
  return keys;
}

static gboolean
check_string (const char *field, const char *what, const char *key,
              const char *s, gsize min, gsize max, GError **error)
{
  gsize len = strlen (s);

  if (len < min || len > max)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "%s: %s%s%s%s must be %zu-%zu bytes, got %zu", field, what,
                 key ? " of key '" : "", key ? key : "", key ? "'" : "", min,
                 max, len);
  else if (!g_utf8_validate (s, (gssize) len, NULL))
    g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                 "%s: %s%s%s%s must be valid UTF-8 without NUL bytes", field,
                 what, key ? " of key '" : "", key ? key : "", key ? "'" : "");
  else
    return TRUE;
  return FALSE;
}

char *
rank_member_data_encode (GHashTable *map, const char *field, gsize *len,
                         GError **error)
{
  guint n = map != NULL ? g_hash_table_size (map) : 0;
  g_autofree const char **keys = NULL;
  gsize total = 0, at = 0;
  char *out;

  if (n > RANK_DATA_KEYS_MAX)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: at most %d keys, got %u", field, RANK_DATA_KEYS_MAX, n);
      return NULL;
    }
  keys = n > 0 ? rank_member_data_keys (map, &n) : NULL;
  for (guint i = 0; i < n; i++)
    {
      const char *k = keys[i], *v = g_hash_table_lookup (map, k);

      /* A key's own bytes may be invalid: name it only once checked. */
      if (!check_string (field, "a key", NULL, k, 1, RANK_DATA_KEY_MAX_BYTES,
                         error)
          || !check_string (field, "the value", k, v, 0,
                            RANK_DATA_VALUE_MAX_BYTES, error))
        return NULL;
      total += strlen (k) + strlen (v);
    }
  if (total > RANK_DATA_TOTAL_MAX_BYTES)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "%s: keys and values must be at most %d bytes in all, "
                   "got %zu",
                   field, RANK_DATA_TOTAL_MAX_BYTES, total);
      return NULL;
    }
  out = g_malloc (total + 3 * n + 1);
  for (guint i = 0; i < n; i++)
    {
      const char *k = keys[i], *v = g_hash_table_lookup (map, k);
      gsize kl = strlen (k), vl = strlen (v);

      out[at++] = (char) kl;
      memcpy (out + at, k, kl);
      at += kl;
      out[at++] = (char) (vl >> 8);
      out[at++] = (char) (vl & 0xff);
      memcpy (out + at, v, vl);
      at += vl;
    }
  *len = at;
  return out;
}

gboolean
rank_member_data_parse (const char *data, gsize len,
                        RankDataPair pairs[RANK_DATA_KEYS_MAX], guint *n)
{
  const guint8 *p = (const guint8 *) data, *end = p + len;

  *n = 0;
  while (p < end)
    {
      RankDataPair *pair;

      if (*n == RANK_DATA_KEYS_MAX || end - p < 1 + (gssize) p[0] + 2)
        return FALSE;
      pair = &pairs[(*n)++];
      pair->key_len = p[0];
      pair->key = (const char *) p + 1;
      p += 1 + pair->key_len;
      pair->value_len = ((gsize) p[0] << 8) | p[1];
      p += 2;
      if ((gsize) (end - p) < pair->value_len)
        return FALSE;
      pair->value = (const char *) p;
      p += pair->value_len;
    }
  return TRUE;
}
