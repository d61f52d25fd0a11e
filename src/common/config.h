/* config.h -- rankd's configuration file: board options and Redis nodes.
 *
 * GLib key-file syntax (see docs/configuration.md, "Configuration file"):
 *
 *   [defaults]            options of every board without its own section
 *   shards=1
 *
 *   [board run_hero]      one board; keys it omits come from [defaults]
 *   shards=10
 *   max_top_depth=10000
 *   order=asc             desc (default) or asc
 *   rank=competition      ordinal (default), competition or dense
 *   mode=best             increment (default), best or set
 *   dedup_window=600      seconds; default rankd's --dedup-window
 *   cap=500               keep only the best 500 members; default none
 *   period=daily          none (default), hourly, daily, weekly, monthly,
 * custom timezone=Europe/Paris IANA zone of calendar periods; default UTC
 *   week_start=monday     first day of weekly periods
 *   period_seconds=600    custom periods: their length ...
 *   period_epoch=0        ... from this Unix time
 *   retention=7           past periods kept (default 1)
 *   accept_late=false     updates for a past retained period (default refused)
 *   subscores=desc,asc    up to 3 tie-breakers after the score, each higher
 *                         first (desc) or lower first (asc); default none
 *   read_cache=tracked    GetTopN/GetRank answers kept in rankd until Redis
 *                         says the board changed (cache.h); default off
 *   read_cache_ms=500     answers kept up to 500 ms (with tracked: at
 *                         most); default 0
 *   read_from=replica     reads from a replica of the board's node, while
 *                         it lags less than max_replica_lag_ms (default
 *                         100); default primary
 *
 *   [redis]
 *   nodes=127.0.0.1:7000;127.0.0.1:7001;127.0.0.1:7002
 *   user=rankd            (Redis 6 ACL user; default: none)
 *   password=...          (AUTH; keep the file private)
 *   replicas=127.0.0.1:7000=127.0.0.1:7100,127.0.0.1:7101;127.0.0.1:7001=...
 *                         each primary's replicas, for read_from=replica
 *   tls=true              TLS to every TCP node (default false; never to
 *                         a unix socket)
 *   tls_ca=FILE           CAs that sign Redis's certificates (PEM;
 *                         default the system's)
 *   tls_cert=FILE         rankd's client certificate and key (PEM), for a
 *   tls_key=FILE          Redis with tls-auth-clients (default none)
 *   tls_server_name=NAME  the name every node's certificate must carry
 *                         (default each node's host as given; an IP
 *                         address is checked as an IP subjectAltName)
 *
 *   [grant web]           roles of the identity "web" (a client
 *                         certificate's name, or uid:N on a unix socket;
 *                         [grant anonymous]: of calls without one)
 *   read=*                each role's boards: ';'-separated patterns,
 *   write=season_*;daily_?   '*' and '?' globs ('*': every board)
 *   admin=season_1        (access.h: without any [grant] section or
 *                         --grant, everyone has read and write, nobody
 *                         admin)
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

#include "access.h"
#include "constants.h"
#include "period.h"

/* How Update combines a value with the current score (the IDL's UpdateMode). */
typedef enum
{
  RANK_MODE_INCREMENT = 1,
  RANK_MODE_BEST = 2,
  RANK_MODE_SET = 3,
  RANK_MODE_REMOVE = 4, /* not an UpdateMode: the Remove method */
} RankMode;

typedef enum
{
  RANK_ORDER_DESC, /* higher scores first */
  RANK_ORDER_ASC,  /* lower scores first (times, golf) */
} RankOrder;

/* Rank numbers for equal scores: 1,2,3,4 / 1,2,2,4 / 1,2,2,3. */
typedef enum
{
  RANK_KIND_ORDINAL = 1,
  RANK_KIND_COMPETITION = 2,
  RANK_KIND_DENSE = 3,
} RankKind;

typedef struct
{
  /* Sorted sets the board is split over; 1: an ordinary board. */
  guint shards;
  /* Largest offset+n GetTopN serves on a sharded board. */
  guint max_top_depth;
  RankOrder order;
  RankKind rank;
  /* The mode of updates that do not set one. */
  RankMode mode;
  /* Seconds a request id is remembered; 0: rankd's --dedup-window. */
  guint dedup_window_s;
  /* The board keeps only its best cap members; 0: no cap. */
  guint cap;
  /* Periodic boards: a set of keys per period (period.h). The timezone is
   * the config's: use it while the config is current (at a call's start). */
  RankPeriodRule period;
  gboolean accept_late; /* updates for past retained periods */
  guint retention;      /* past periods kept */
  /* Tie-breakers after the score: how many, and which sort lower first. */
  guint n_subscores;
  gboolean subscore_asc[RANK_SUBSCORES_MAX];
  /* The update queue (src/methods/drain.h): Enqueue takes updates for the
   * board; entries pending this long on a rankd are claimed by another; at most
   * this many wait; at most this many are applied a second (0: any). */
  gboolean queue;
  guint queue_claim_after_s;
  guint queue_max_backlog;
  guint queue_rate;
  /* The read cache (cache.h): answers kept until Redis reports a change
   * (tracked), and/or for at most read_cache_ms (0: no age limit with
   * tracked; no cache without). */
  gboolean read_cache_tracked;
  guint read_cache_ms;
  /* Reads may go to a replica of the board's node ([redis] replicas)
   * whose replication lag is under max_replica_lag_ms, and that has every
   * write this rankd acknowledged on the board (backend.h). */
  gboolean read_from_replica;
  guint max_replica_lag_ms;
  /* A rolling window (store/lua/window.lua): the combination of the
   * current period and the window-1 before it (mode=increment: their sum;
   * best: the best), kept as a board of its own; 0: none. */
  guint window;
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

/* The boards with a [board NAME] section, sorted, NULL-terminated; free
 * with g_strfreev. */
char **rank_config_board_names (const RankConfig *config);

/* [redis] nodes as written ("HOST:PORT" or "unix:PATH"), NULL-terminated;
 * empty when the file names none. */
const char *const *rank_config_redis_nodes (const RankConfig *config);

/* [redis] replicas of primary (HOST:PORT or unix:PATH, compared as
 * addresses), NULL-terminated; NULL if none. */
const char *const *rank_config_redis_replicas (const RankConfig *config,
                                               const char *primary);

/* How many primaries [redis] replicas names. */
guint rank_config_redis_replica_sets (const RankConfig *config);

/* The grants: [grant NAME] sections, and --grant options added. */
const RankGrants *rank_config_grants (const RankConfig *config);

/* Adds a --grant option ("NAME=ROLE[,ROLE...]": those roles on every
 * board) to a configuration not yet shared (just loaded or made). */
gboolean rank_config_add_grant_option (RankConfig *config, const char *option,
                                       GError **error);

/* [redis] user and password, or NULL. */
const char *rank_config_redis_user (const RankConfig *config);
const char *rank_config_redis_password (const RankConfig *config);

/* [redis] tls and its keys as written (NULL: not given); the files are
 * not read here. */
typedef struct
{
  gboolean tls;
  char *ca_file;     /* tls_ca */
  char *cert_file;   /* tls_cert */
  char *key_file;    /* tls_key */
  char *server_name; /* tls_server_name */
} RankConfigRedisTls;
const RankConfigRedisTls *rank_config_redis_tls (const RankConfig *config);

#endif /* RANK_CONFIG_H */
