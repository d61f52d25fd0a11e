/* tls.h -- TLS on rankd's own sockets (OpenSSL): the Thrift port's TLS
 * listeners, the links to Redis, and the blocking client.
 *
 * Every socket stays non-blocking and owned by its caller: a session only
 * moves bytes through it, so it fits the event loops (server, Redis links)
 * and the client's poll-with-timeout alike. TLS 1.2 is the oldest version
 * spoken, renegotiation is refused, and a client verifies the server's
 * certificate and name unless told otherwise.
 *
 * A context is immutable once made and reference-counted: a reload
 * (SIGHUP) makes a new one for new sessions while open ones keep theirs.
 */
#ifndef RANK_TLS_H
#define RANK_TLS_H

#include <glib.h>
#include <sys/uio.h>

/* Errors in RANK_ERROR's domain (error.h): RANK_ERROR_INVALID for files
 * that do not load, RANK_ERROR_UNAVAILABLE for a failed handshake or I/O. */

typedef struct _RankTlsContext RankTlsContext;
typedef struct _RankTlsSession RankTlsSession;

/* Where a peer's identity is read from its verified certificate. */
typedef enum
{
  RANK_TLS_IDENTITY_CN,    /* the subject's commonName (default) */
  RANK_TLS_IDENTITY_DNS,   /* its first DNS subjectAltName */
  RANK_TLS_IDENTITY_URI,   /* its first URI subjectAltName */
  RANK_TLS_IDENTITY_EMAIL, /* its first email subjectAltName */
} RankTlsIdentity;

typedef struct
{
  /* PEM files. A server needs cert and key; a client gives them for
   * mutual TLS (both or neither). */
  const char *cert_file;
  const char *key_file;
  /* Server: client certificates are asked for and verified against these
   * CAs (NULL: none asked). Client: the server's certificate is verified
   * against them (NULL: the system's default CAs). */
  const char *ca_file;
  /* Server with ca_file: a client without a certificate may still
   * connect, as anonymous (default FALSE: the handshake fails). */
  gboolean client_cert_optional;
  /* Client: skip verifying the server's certificate (tests, never
   * production; default FALSE). */
  gboolean insecure;
} RankTlsFiles;

/* Parses a --tls-identity value: cn, dns, uri or email. */
gboolean rank_tls_identity_parse (const char *text, RankTlsIdentity *out,
                                  GError **error);

RankTlsContext *rank_tls_server_context_new (const RankTlsFiles *files,
                                             GError **error);
RankTlsContext *rank_tls_client_context_new (const RankTlsFiles *files,
                                             GError **error);
RankTlsContext *rank_tls_context_ref (RankTlsContext *ctx);
void rank_tls_context_unref (RankTlsContext *ctx);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (RankTlsContext, rank_tls_context_unref)

typedef enum
{
  RANK_TLS_OK,         /* done / some bytes moved */
  RANK_TLS_WANT_READ,  /* wait until fd is readable, then call again */
  RANK_TLS_WANT_WRITE, /* wait until fd is writable, then call again */
  RANK_TLS_CLOSED,     /* the peer closed (close_notify or EOF) */
  RANK_TLS_FAILED,     /* see error; the session is done */
} RankTlsStatus;

/* A session on fd (connected, non-blocking; the caller keeps and closes
 * it). server_name: a client's SNI and the name its server's certificate
 * must carry (NULL: not checked; a server passes NULL). */
RankTlsSession *rank_tls_session_new (RankTlsContext *ctx, int fd,
                                      const char *server_name);
/* Frees the session; fd stays open. Sends no close_notify: see
 * rank_tls_shutdown. */
void rank_tls_session_free (RankTlsSession *session);

/* Advances the handshake: RANK_TLS_OK once it is done. */
RankTlsStatus rank_tls_handshake (RankTlsSession *session, GError **error);

/* Reads up to len bytes: RANK_TLS_OK with *got > 0, or a status to wait
 * on. Bytes may stay decrypted inside the session after a read that
 * filled buf: read again until WANT_READ before sleeping on an
 * edge-triggered fd (rank_tls_pending tells). */
RankTlsStatus rank_tls_read (RankTlsSession *session, void *buf, gsize len,
                             gsize *got, GError **error);
gboolean rank_tls_pending (RankTlsSession *session);

/* After a read: nothing is left in the session and the socket gave less
 * than was asked, so it has nothing more either; an edge-triggered watch
 * tells when more comes (saves the read that would say WANT_READ). */
gboolean rank_tls_drained (RankTlsSession *session);

/* Frees the session's buffers if they hold nothing (an idle connection;
 * they come back with its next bytes). */
void rank_tls_trim (RankTlsSession *session);

/* Writes from the n buffers in order, as much as the socket takes:
 * RANK_TLS_OK with *wrote bytes (maybe fewer than all), or WANT_WRITE /
 * WANT_READ with *wrote so far. A write that stopped on WANT_* must be
 * repeated with the same bytes still at the head. */
RankTlsStatus rank_tls_writev (RankTlsSession *session, const struct iovec *iov,
                               int n, gsize *wrote, GError **error);

/* Sends close_notify if it can without blocking (best effort). */
void rank_tls_shutdown (RankTlsSession *session);

/* The peer's identity from its verified certificate, as mode says; NULL
 * when it sent none (or it has no such name). Free with g_free. */
char *rank_tls_peer_identity (RankTlsSession *session, RankTlsIdentity mode);

/* The negotiated protocol version, e.g. "TLSv1.3" (static string). */
const char *rank_tls_version (RankTlsSession *session);

#endif /* RANK_TLS_H */
