// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface GetResultRequest {
  'reqId'?: (string);
  /**
   * `png`, `jpeg` (or `jpg`), `webp` for a picture; `mp4`, `webm`, `gif`,
   * `apng` for a video. Empty: `png` for a picture, `mp4` for a video.
   */
  'format'?: (string);
  /**
   * JPEG and WebP quality, 1-100; 0 = 90.
   */
  'quality'?: (number);
}

export interface GetResultRequest__Output {
  'reqId': (string);
  /**
   * `png`, `jpeg` (or `jpg`), `webp` for a picture; `mp4`, `webm`, `gif`,
   * `apng` for a video. Empty: `png` for a picture, `mp4` for a video.
   */
  'format': (string);
  /**
   * JPEG and WebP quality, 1-100; 0 = 90.
   */
  'quality': (number);
}
