package imageio

import "encoding/binary"

// JPEGOrientation returns the EXIF orientation tag (0x0112) of a JPEG's
// APP1 "Exif" segment, or 1 when there is none or it is malformed. It scans
// the marker segments up to the start of scan and never reads out of
// bounds.
func JPEGOrientation(data []byte) int {
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return 1
	}
	p := 2
	for p+4 <= len(data) {
		if data[p] != 0xFF {
			return 1
		}
		marker := data[p+1]
		if marker == 0xFF { // fill byte
			p++
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // start of scan / end of image
			return 1
		}
		n := int(binary.BigEndian.Uint16(data[p+2:]))
		if n < 2 || p+2+n > len(data) {
			return 1
		}
		seg := data[p+4 : p+2+n]
		if marker == 0xE1 && len(seg) >= 6 && string(seg[:6]) == "Exif\x00\x00" {
			if o := tiffOrientation(seg[6:]); o != 0 {
				return o
			}
		}
		p += 2 + n
	}
	return 1
}

// tiffOrientation reads tag 0x0112 from IFD0 of a TIFF header; 0 if absent
// or invalid.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	if bo.Uint16(t[2:]) != 42 {
		return 0
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return 0
	}
	n := int64(bo.Uint16(t[off:]))
	for i := int64(0); i < n; i++ {
		e := off + 2 + 12*i
		if e+12 > int64(len(t)) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		if bo.Uint16(t[e+2:]) != 3 { // SHORT
			return 0
		}
		v := int(bo.Uint16(t[e+8:]))
		if v < 1 || v > 8 {
			return 0
		}
		return v
	}
	return 0
}

// Orient applies EXIF orientation o to img, returning the image as it is
// meant to be displayed (o outside 2…8 returns img unchanged). With the
// stored image of size W×H and output pixel (x, y):
//
//	2: src(W−1−x, y)        mirror horizontally
//	3: src(W−1−x, H−1−y)    rotate 180°
//	4: src(x, H−1−y)        mirror vertically
//	5: src(y, x)            transpose
//	6: src(y, H−1−x)        rotate 90° clockwise
//	7: src(W−1−y, H−1−x)    transverse
//	8: src(W−1−y, x)        rotate 90° counter-clockwise
//
// (orientations 5–8 swap width and height).
func Orient(img *RGB, o int) *RGB {
	if o < 2 || o > 8 {
		return img
	}
	W, H := img.W, img.H
	ow, oh := W, H
	if o >= 5 {
		ow, oh = H, W
	}
	out := &RGB{W: ow, H: oh, Pix: make([]uint8, len(img.Pix))}
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = W-1-x, y
			case 3:
				sx, sy = W-1-x, H-1-y
			case 4:
				sx, sy = x, H-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, H-1-x
			case 7:
				sx, sy = W-1-y, H-1-x
			case 8:
				sx, sy = W-1-y, x
			}
			copy(out.Pix[(y*ow+x)*3:(y*ow+x)*3+3], img.Pix[(sy*W+sx)*3:])
		}
	}
	return out
}
