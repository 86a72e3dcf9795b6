#ifndef PLACED_CSYSTEMD_SHIM_H
#define PLACED_CSYSTEMD_SHIM_H
#include <malloc.h> /* malloc_trim, for PlacedSystem's HeapMemory */
#include <signal.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>

/* sd-bus vtables are built with the SD_BUS_* initializer macros, which Swift cannot use. These fill
 * one element in place, as the macros would, into memory the caller zeroed (sd-bus requires the
 * unused parts of each element's union to be zero). `names` is the macros' SD_BUS_PARAM list: each
 * argument name followed by a NUL, inputs then outputs. */

static inline void placed_bus_vtable_start(sd_bus_vtable *v, uint64_t flags) {
    v->type = _SD_BUS_VTABLE_START;
    v->flags = flags;
    v->x.start.element_size = sizeof(sd_bus_vtable);
    v->x.start.features = _SD_BUS_VTABLE_PARAM_NAMES;
    v->x.start.vtable_format_reference = &sd_bus_object_vtable_format;
}

static inline void placed_bus_vtable_method(
    sd_bus_vtable *v, const char *member, const char *signature, const char *result, const char *names,
    sd_bus_message_handler_t handler, uint64_t flags) {
    v->type = _SD_BUS_VTABLE_METHOD;
    v->flags = flags;
    v->x.method.member = member;
    v->x.method.signature = signature;
    v->x.method.result = result;
    v->x.method.handler = handler;
    v->x.method.offset = 0;
    v->x.method.names = names;
}

static inline void placed_bus_vtable_signal(
    sd_bus_vtable *v, const char *member, const char *signature, const char *names, uint64_t flags) {
    v->type = _SD_BUS_VTABLE_SIGNAL;
    v->flags = flags;
    v->x.signal.member = member;
    v->x.signal.signature = signature;
    v->x.signal.names = names;
}

static inline void placed_bus_vtable_property(
    sd_bus_vtable *v, const char *member, const char *signature, sd_bus_property_get_t get, uint64_t flags) {
    v->type = _SD_BUS_VTABLE_PROPERTY;
    v->flags = flags;
    v->x.property.member = member;
    v->x.property.signature = signature;
    v->x.property.get = get;
    v->x.property.set = NULL;
    v->x.property.offset = 0;
}

static inline void placed_bus_vtable_end(sd_bus_vtable *v) {
    v->type = _SD_BUS_VTABLE_END;
    v->flags = 0;
}

#endif
