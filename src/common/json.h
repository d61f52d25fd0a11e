/* json.h -- JSON text for rankctl and the board viewer (src/net/http.c). */
#ifndef RANK_JSON_H
#define RANK_JSON_H

#include <glib.h>

typedef enum
{
  /* Control characters as \n, \t or \u00XX. */
  RANK_JSON_PLAIN,
  /* Every control character and <, >, & as \u00XX: safe inside HTML too. */
  RANK_JSON_HTML_SAFE,
} RankJsonStyle;

/* s as a JSON string; invalid UTF-8 (data rankd did not write) is
 * replaced. */
void rank_json_string (GString *out, const char *s, RankJsonStyle style);

/* A string -> string map as a JSON object, keys in byte order. */
void rank_json_map (GString *out, GHashTable *map, RankJsonStyle style);

#endif /* RANK_JSON_H */
