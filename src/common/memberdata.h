/* memberdata.h -- a member's data (Update.data, SetMemberData) as rankd
 * stores it: one hash field per member, the map encoded as its entries in
 * key order, each
 *
 *   key length (1 byte) | key | value length (2 bytes, big-endian) | value
 *
 * so the same map always gives the same bytes (a retry's fingerprint) and
 * a reply is written without parsing anything but lengths.
 */
#ifndef RANK_MEMBERDATA_H
#define RANK_MEMBERDATA_H

#include <glib.h>

#include "constants.h"

typedef struct
{
  const char *key;
  gsize key_len;
  const char *value;
  gsize value_len;
} RankDataPair;

/* map's keys (string -> string) in byte order, the order they are stored
 * in; *n of them. g_free the array, not the keys. */
const char **rank_member_data_keys (GHashTable *map, guint *n);

/* Checks map (string -> string) against the limits in constants.h, naming
 * field in the error, and returns its encoding (g_free it; an empty map
 * gives an empty, non-NULL buffer), or NULL. */
char *rank_member_data_encode (GHashTable *map, const char *field, gsize *len,
                               GError **error);

/* The entries of an encoding, pointing into data; FALSE if it is not one. */
gboolean rank_member_data_parse (const char *data, gsize len,
                                 RankDataPair pairs[RANK_DATA_KEYS_MAX],
                                 guint *n);

#endif /* RANK_MEMBERDATA_H */
