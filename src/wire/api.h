/* api.h -- the generated Thrift types of idl/ranking.thrift, with g_autoptr
 * cleanups, for rankd, rankctl, the bench and the tests. */
#ifndef RANK_API_H
#define RANK_API_H

#include "rank_ranking.h"
#include "rank_ranking_types.h"

/* The IDL's version (IDL_VERSION in idl/ranking.thrift; the generated
 * RANK_IDL_VERSION allocates). tests/test_codec.c checks they agree. */
#define RANK_API_IDL_VERSION "1.8"

G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankUpdateRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankUpdateResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankEntry, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankRankOf, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankRemoveResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankUpdateResult, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetRankRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetTopNRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetAroundRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetRanksRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankRemoveRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankCountRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankCountBetweenRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetPercentileRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetScoreAtPercentileRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankSampleRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankSetMemberDataRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetMemberDataRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankUpdateBatchRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankUpdateBatchResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetServerInfoRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankServerInfo, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankListBoardsRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankListBoardsResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankBoardSummary, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetBoardInfoRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankBoardInfo, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankDeleteBoardRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankDeleteBoardResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankResetBoardRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankResetBoardResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankExportRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankExportResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankExportEntry, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankEnqueueRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankEnqueueResponse, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankEnqueueResult, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankGetQueueStatusRequest, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (rankQueueStatus, g_object_unref)

#endif
