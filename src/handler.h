/* handler.h -- the Ranking service's methods: validate, call the store, map
 * the outcome onto the IDL's results and exceptions.
 */
#ifndef RANK_HANDLER_H
#define RANK_HANDLER_H

#include "rank_ranking.h"
#include "store.h"

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankRankingHandler, g_object_unref)

#define RANK_TYPE_HANDLER (rank_handler_get_type ())
G_DECLARE_FINAL_TYPE (RankHandler, rank_handler, RANK, HANDLER,
                      rankRankingHandler)

/* store is not owned and must outlive the handler. */
RankHandler *rank_handler_new (RankStore *store);

G_END_DECLS

#endif /* RANK_HANDLER_H */
