package redisconn_test

import "voiceroom/apperr"

func apperrField(err error) string { return apperr.ConfigFieldOf(err) }
