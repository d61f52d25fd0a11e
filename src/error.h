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
  RANK_ERROR_INVALID, /* -> InvalidArgument: the caller must change the request
                       */
  RANK_ERROR_NOT_FOUND,   /* -> NotFound */
  RANK_ERROR_UNAVAILABLE, /* -> Unavailable: storage down or slow; retry is safe
                           */
  RANK_ERROR_INTERNAL, /* -> TApplicationException: a bug or an unexpected reply
                        */
} RankErrorCode;

#endif /* RANK_ERROR_H */
