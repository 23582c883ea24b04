package imbridge
