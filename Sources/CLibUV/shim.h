// libuv, for the loop runtime (PresenceLoop): the server creates the uv loop itself and hands it
// to libwebsockets as a foreign loop, so other event sources (hiredis) can share it.
#ifndef PRESENCE_UV_SHIM_H
#define PRESENCE_UV_SHIM_H

#include <uv.h>

#endif
