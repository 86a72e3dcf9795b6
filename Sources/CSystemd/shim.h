#ifndef PLACED_CSYSTEMD_SHIM_H
#define PLACED_CSYSTEMD_SHIM_H
#include <signal.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>
#endif
