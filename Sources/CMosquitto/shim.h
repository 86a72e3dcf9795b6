#ifndef PLACED_CMOSQUITTO_SHIM_H
#define PLACED_CMOSQUITTO_SHIM_H
// What the fleet export needs from C: libmosquitto's declarations (MQTT 3.1.1 and 5), and the kernel
// clock's synchronization state (adjtimex), which Glibc's Swift module leaves out.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <sys/timex.h>

// placed does not link libmosquitto: it opens it with dlopen when a broker is configured, and calls
// each function through a pointer of the function's own type, declared here from the header so the
// types cannot drift from the library's.
#define PLACED_MOSQUITTO_FUNCTION(name) typedef __typeof__(&name) placed_##name##_fn;
PLACED_MOSQUITTO_FUNCTION(mosquitto_lib_init)
PLACED_MOSQUITTO_FUNCTION(mosquitto_lib_version)
PLACED_MOSQUITTO_FUNCTION(mosquitto_strerror)
PLACED_MOSQUITTO_FUNCTION(mosquitto_connack_string)
PLACED_MOSQUITTO_FUNCTION(mosquitto_reason_string)
PLACED_MOSQUITTO_FUNCTION(mosquitto_new)
PLACED_MOSQUITTO_FUNCTION(mosquitto_destroy)
PLACED_MOSQUITTO_FUNCTION(mosquitto_user_data_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_int_option)
PLACED_MOSQUITTO_FUNCTION(mosquitto_max_inflight_messages_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_will_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_username_pw_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_tls_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_tls_opts_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_tls_insecure_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_connect_v5_callback_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_publish_v5_callback_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_disconnect_v5_callback_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_log_callback_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_property_add_int32)
PLACED_MOSQUITTO_FUNCTION(mosquitto_property_free_all)
PLACED_MOSQUITTO_FUNCTION(mosquitto_connect_bind_v5)
PLACED_MOSQUITTO_FUNCTION(mosquitto_connect_async)
PLACED_MOSQUITTO_FUNCTION(mosquitto_socket)
PLACED_MOSQUITTO_FUNCTION(mosquitto_publish)
PLACED_MOSQUITTO_FUNCTION(mosquitto_disconnect)
PLACED_MOSQUITTO_FUNCTION(mosquitto_loop_read)
PLACED_MOSQUITTO_FUNCTION(mosquitto_loop_write)
PLACED_MOSQUITTO_FUNCTION(mosquitto_loop_misc)
PLACED_MOSQUITTO_FUNCTION(mosquitto_want_write)
PLACED_MOSQUITTO_FUNCTION(mosquitto_subscribe)
PLACED_MOSQUITTO_FUNCTION(mosquitto_subscribe_callback_set)
PLACED_MOSQUITTO_FUNCTION(mosquitto_message_callback_set)
#undef PLACED_MOSQUITTO_FUNCTION

// STA_UNSYNC and TIME_ERROR are plain integer macros Swift imports; nothing variadic is used.
#endif
