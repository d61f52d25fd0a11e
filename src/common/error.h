/* error.h -- the GError domain of rankd.
 *
 * Every fallible function takes a GError ** last. The codes map one to one
 * onto the IDL's exceptions, so the handler never has to guess.
 */
#ifndef RANK_ERROR_H
#define RANK_ERROR_H

#include <glib.h>

#define RANK_ERROR (rank_error_quark ())
GQuark rank_error_quark (void);

typedef enum
{
  /* -> InvalidArgument: the caller must change the request. */
  RANK_ERROR_INVALID,
  /* -> NotFound. */
  RANK_ERROR_NOT_FOUND,
  /* -> Unavailable: storage down or slow; a retry is safe. */
  RANK_ERROR_UNAVAILABLE,
  /* -> TApplicationException: a bug, damaged data, an unexpected reply. */
  RANK_ERROR_INTERNAL,
  /* -> PermissionDenied: the caller lacks a role (access.h). */
  RANK_ERROR_DENIED,
} RankErrorCode;

#endif /* RANK_ERROR_H */
