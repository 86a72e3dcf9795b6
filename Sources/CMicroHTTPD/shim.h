#ifndef PLACED_CMICROHTTPD_SHIM_H
#define PLACED_CMICROHTTPD_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* MHD_start_daemon, MHD_get_daemon_info and MHD_get_connection_info are variadic, which Swift cannot call. These pass the
 * options placed-web uses, each with the exact C type the variadic list expects. */

/* A daemon in external polling mode (no thread of its own) with epoll, serving on a listening socket
 * the caller made, with suspend/resume for Server-Sent Events and slow upstream calls. */
static inline struct MHD_Daemon *placed_mhd_start(
    int listen_fd, unsigned int connection_limit, unsigned int connection_timeout, size_t memory_limit,
    MHD_AccessHandlerCallback handler, void *handler_context, MHD_RequestCompletedCallback completed,
    void *completed_context) {
    return MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, handler_context,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
        MHD_OPTION_END);
}

/* The epoll descriptor an external event loop waits on (readable: call MHD_run); -1 without one. */
static inline int placed_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

/* The socket of a connection, to watch a suspended event stream for its page hanging up. */
static inline int placed_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

#endif
