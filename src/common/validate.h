/* validate.h -- the rules every request field must follow.
 *
 * Each check fails with RANK_ERROR_INVALID and a message that names the
 * field and the limit, the text the client sees in InvalidArgument.
 */
#ifndef RANK_VALIDATE_H
#define RANK_VALIDATE_H

#include <glib.h>

gboolean rank_validate_board (const char *board, GError **error);
gboolean rank_validate_member (const char *member, GError **error);
gboolean rank_validate_request_id (const char *request_id, GError **error);
gboolean rank_validate_score (const char *field, gint64 value, GError **error);
gboolean rank_validate_timestamp (const char *field, gint64 ms, GError **error);

#endif /* RANK_VALIDATE_H */
