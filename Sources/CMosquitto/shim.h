#ifndef PLACED_CMOSQUITTO_SHIM_H
#define PLACED_CMOSQUITTO_SHIM_H
// What the fleet export needs from C: libmosquitto (MQTT 3.1.1 and 5), and the kernel clock's
// synchronization state (adjtimex), which Glibc's Swift module leaves out.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <sys/timex.h>

// STA_UNSYNC and TIME_ERROR are plain integer macros Swift imports; nothing variadic is used.
#endif
