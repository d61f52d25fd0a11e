/* config.h -- rankd's configuration file: board options and Redis nodes.
 *
 * GLib key-file syntax (see README "Configuration file"):
 *
 *   [defaults]            options of every board without its own section
 *   shards=1
 *
 *   [board run_hero]      one board; keys it omits come from [defaults]
 *   shards=10
 *   max_top_depth=10000
 *
 *   [redis]
 *   nodes=127.0.0.1:7000;127.0.0.1:7001;127.0.0.1:7002
 *   user=rankd            (Redis 6 ACL user; default: none)
 *   password=...          (AUTH; keep the file private)
 *
 * Loading is strict: an unreadable file, a line that is not a section, a
 * key=value or a comment, an unknown section or key, a repeated one, or a
 * bad value fails with a message "FILE:LINE: [section] key: what is wrong".
 * A loaded configuration is immutable and reference-counted: every thread
 * may read it, and SIGHUP swaps in a new one while calls still hold the old.
 */
#ifndef RANK_CONFIG_H
#define RANK_CONFIG_H

#include <glib.h>

typedef struct
{
  /* Sorted sets the board is split over; 1: an ordinary board. */
  guint shards;
  /* Largest offset+n GetTopN serves on a sharded board. */
  guint max_top_depth;
} RankBoardOptions;

typedef struct _RankConfig RankConfig;

/* Built-in defaults only: every board ordinary, no nodes. Both
 * constructors return a reference owned by the caller. */
RankConfig *rank_config_new (void);

RankConfig *rank_config_load (const char *path, GError **error);

RankConfig *rank_config_ref (RankConfig *config);
void rank_config_unref (RankConfig *config);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (RankConfig, rank_config_unref)

/* The options of board: its own section, or [defaults]. */
const RankBoardOptions *rank_config_board (const RankConfig *config,
                                           const char *board);

/* [redis] nodes as written ("HOST:PORT" or "unix:PATH"), NULL-terminated;
 * empty when the file names none. */
const char *const *rank_config_redis_nodes (const RankConfig *config);

/* [redis] user and password, or NULL. */
const char *rank_config_redis_user (const RankConfig *config);
const char *rank_config_redis_password (const RankConfig *config);

#endif /* RANK_CONFIG_H */
